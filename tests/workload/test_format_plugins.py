"""Trace formats as plug-ins (``themis.trace_formats``): the in-tree example
``examples/trace_format_plugin`` (Slurm ``sacct``) is made importable the way pip would
install it, from its own pyproject.toml's entry points, and then read, detected and
simulated like a built-in format; broken plug-ins are skipped with one warning each."""

from __future__ import annotations

import tomllib
import warnings
from pathlib import Path

import pytest

from tests import dist_info
from themis.cli.main import run
from themis.errors import ThemisError
from themis.workload import formats, load_workload
from themis.workload.formats import detect_format, format_names, parse_format

EXAMPLE = Path(__file__).parents[2] / "examples" / "trace_format_plugin"

SACCT = """JobID|User|Account|Submit|Start|Elapsed|AllocTRES|State
100|ana|ml|2024-03-01T09:00:00|2024-03-01T09:00:05|01:00:00|cpu=8,gres/gpu=2,mem=32G|COMPLETED
100.batch|ana|ml|2024-03-01T09:00:00|2024-03-01T09:00:05|01:00:00|cpu=8,gres/gpu=2|COMPLETED
101|ana|ml|2024-03-01T09:10:00|2024-03-01T09:20:00|02:00:00|cpu=4,gres/gpu:a100=4|COMPLETED
102|bo|ml|2024-03-01T09:05:00|2024-03-01T09:05:00|1-00:30:00|cpu=2,gres/gpu=1|TIMEOUT
103|bo|ml|2024-03-01T09:06:00|None|00:00:00|cpu=2,gres/gpu=1|CANCELLED
104|cy|ml|2024-03-01T09:07:00|2024-03-01T09:07:00|00:10:00|cpu=16,mem=64G|COMPLETED
"""


def install(site: Path, name: str, entries: dict[str, str], monkeypatch) -> None:
    """A distribution ``name`` declaring ``entries`` as trace formats, and the example's
    source on ``sys.path``."""
    dist_info.install(site, name, "themis.trace_formats", entries, monkeypatch)
    monkeypatch.syspath_prepend(str(EXAMPLE / "src"))


#: The built-in formats, in their registry order (plug-ins come after them).
BUILTINS = ["themis", "hyperdrive", "philly", "gavel", "tiresias", "pai", "helios", "pcs"]


@pytest.fixture
def fresh_formats():
    """The registry as before any format was loaded; afterwards as before the test."""
    saved = (formats.FORMATS.entries, formats.FORMATS.broken, formats.FORMATS.loaded)
    formats.FORMATS.entries, formats.FORMATS.broken, formats.FORMATS.loaded = {}, {}, False
    yield
    formats.FORMATS.entries, formats.FORMATS.broken, formats.FORMATS.loaded = saved


def example_entries() -> dict[str, str]:
    project = tomllib.loads((EXAMPLE / "pyproject.toml").read_text())
    return project["project"]["entry-points"]["themis.trace_formats"]


def test_the_example_format_is_detected_read_and_accounted(tmp_path, monkeypatch, fresh_formats):
    install(tmp_path / "site", "themis_sacct", example_entries(), monkeypatch)
    names = format_names()
    assert names[:8] == BUILTINS
    assert names[8:] == ["sacct"]
    trace = tmp_path / "jobs.txt"  # no telling suffix: told by its header
    trace.write_text(SACCT)
    assert detect_format(trace, str(trace)).name == "sacct"
    workload = load_workload(str(trace))
    assert workload.notes["format"] == "sacct"
    assert workload.notes["excluded"] == {"job_step": 1, "never_started": 1, "cpu_only": 1}
    assert workload.notes["ignored_columns"] == ["Account", "State"]
    jobs = {j.job_id: (j.gang, j.line) for a in workload.apps for j in a.jobs}
    assert jobs == {"100": (2, 2), "101": (4, 4), "102": (1, 5)}
    by_owner = {a.owner: a.arrival for a in workload.apps}
    assert by_owner == {"ana": 0.0, "bo": 300.0}  # trace times, from the first submit


def test_the_command_line_runs_a_plugin_format(tmp_path, monkeypatch, capsys, fresh_formats):
    install(tmp_path / "site", "themis_sacct", example_entries(), monkeypatch)
    trace = tmp_path / "jobs.sacct"
    trace.write_text(SACCT)
    out = tmp_path / "o"
    args = ["simulate", "--trace", str(trace), "--cluster", "1x1x4", "--policy", "fifo"]
    assert run([*args, "--out", str(out), "-q"]) == 0
    assert (out / "summary.json").exists()
    bad = tmp_path / "bad.sacct"
    bad.write_text(SACCT.replace("01:00:00|cpu=8,gres/gpu=2,mem", "an hour|cpu=8,gres/gpu=2,mem"))
    assert run([*args, "--trace", str(bad), "--out", str(tmp_path / "b"), "-q"]) == 2
    assert f"{bad}:2, field 'Elapsed': not a duration" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        ({"broken": "no_such_module_anywhere:FORMAT"}, "cannot load: ModuleNotFoundError"),
        ({"gavel": "themis_sacct:FORMAT"}, "the name of a built-in format"),
        ({"slurm": "themis_sacct:FORMAT"}, "declares the name 'sacct', not 'slurm'"),
        ({"sacct": "themis_sacct:read"}, "is a function, not a TraceFormatPlugin"),
    ],
)
def test_a_bad_plugin_is_skipped_with_one_warning_naming_it(
    tmp_path, monkeypatch, fresh_formats, entries, message
) -> None:
    name = next(iter(entries))
    install(tmp_path / "site", "bad_format", entries, monkeypatch)
    with pytest.warns(formats.FormatPluginWarning, match=f"trace format plugin '{name}'") as caught:
        names = format_names()
    assert len(caught) == 1 and message in str(caught[0].message)
    assert names[:8] == BUILTINS
    if name != "gavel":  # asking for it by name: its own reason
        with pytest.raises(ThemisError, match=f"trace format plugin '{name}'.*{message}"):
            parse_format(name)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        format_names()  # warned once, not at every use
