"""Convert every sample to themis's own format (JSON and YAML) and back: the same
workload, and so the same simulation, app by app and lease by lease."""

from __future__ import annotations

import pytest

from themis.model.cluster import Cluster
from themis.policies import make_policy
from themis.reports import app_rows
from themis.simulator import simulate
from themis.workload import load_workload

from .conftest import SAMPLE_FILES, workload_key

CLUSTER = Cluster.from_spec("2x4x8")


def _run(workload, policy: str):
    result = simulate(workload, CLUSTER, make_policy(policy))
    return app_rows(result), [
        (i.start, i.end, i.app_id, i.job_id, i.gpus) for i in result.intervals
    ]


@pytest.mark.parametrize("encoding", ["json", "yaml"])
@pytest.mark.parametrize("sample", sorted(SAMPLE_FILES))
def test_convert_and_back_gives_the_same_simulation(
    themis, tmp_path, sample: str, encoding: str
) -> None:
    source = SAMPLE_FILES[sample]
    first = tmp_path / f"once.{encoding}"
    outcome = themis("trace", "convert", source, "--to", "themis", "-o", first, "--seed", 3)
    assert outcome.code == 0, outcome.err
    original = load_workload(str(source), seed=3)
    converted = load_workload(str(first))
    assert workload_key(converted) == workload_key(original)
    # Converting the converted file changes nothing either.
    second = tmp_path / f"twice.{encoding}"
    assert themis("trace", "convert", first, "--to", "themis", "-o", second).code == 0
    assert workload_key(load_workload(str(second))) == workload_key(original)
    for policy in ("fifo", "themis"):
        assert _run(converted, policy) == _run(original, policy)


def test_converted_file_keeps_arrival_mode_and_models(themis, tmp_path) -> None:
    """HyperDrive replays at a fixed interval by default; the converted file holds those
    arrivals, and the seeded model draw, so it needs no options to load the same."""
    out = tmp_path / "hd.yaml"
    assert themis("trace", "convert", SAMPLE_FILES["hyperdrive"], "--to", "themis", "-o", out,
                  "--app-interval", 1234, "--seed", 9).code == 0  # fmt: skip
    w = load_workload(str(out), seed=0)  # another seed: the models are in the file now
    assert [a.arrival for a in w.apps] == [0.0, 1234.0]
    original = load_workload(str(SAMPLE_FILES["hyperdrive"]), seed=9, app_interval=1234)
    assert [a.model for a in w.apps] == [a.model for a in original.apps]
    assert "interval" in out.read_text()  # provenance kept in the file's notes


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_owners_are_written_and_read_back(tmp_path, suffix: str) -> None:
    """``owner`` (fairness/shares.py) survives a write and a read; apps without one stay
    their own owners, and a bad owner is an error naming the field."""
    import dataclasses

    from themis.errors import ThemisError
    from themis.workload.writer import write_workload

    original = load_workload(str(SAMPLE_FILES["hyperdrive"]), seed=3)
    apps = list(original.apps)
    apps[0] = dataclasses.replace(apps[0], owner="team-a")
    owned = dataclasses.replace(original, apps=tuple(apps))
    path = tmp_path / f"owned{suffix}"
    with path.open("w") as out:
        write_workload(owned, out, suffix.lstrip("."))
    back = load_workload(str(path))
    assert [a.owner for a in back.apps[:2]] == ["team-a", None]
    assert [a.tenant for a in back.apps[:2]] == ["team-a", back.apps[1].app_id]
    bad = tmp_path / "bad.json"
    bad.write_text(path.read_text().replace('"owner": "team-a"', '"owner": ""', 1))
    if suffix == ".json":
        with pytest.raises(ThemisError, match=r"apps\[0\]\.owner"):
            load_workload(str(bad))


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_progress_weights_are_written_and_read_back(tmp_path, suffix: str) -> None:
    """``progress_weight`` (the app's own trial order) survives a write and a read; an app
    without one keeps the default 1, and a negative one is an error naming the field."""
    import dataclasses

    from themis.errors import ThemisError
    from themis.workload.writer import write_workload

    original = load_workload(str(SAMPLE_FILES["hyperdrive"]), seed=3)
    apps = list(original.apps)
    apps[0] = dataclasses.replace(apps[0], progress_weight=0.0)
    apps[1] = dataclasses.replace(apps[1], progress_weight=2.5)
    weighted = dataclasses.replace(original, apps=tuple(apps))
    path = tmp_path / f"weighted{suffix}"
    with path.open("w") as out:
        write_workload(weighted, out, suffix.lstrip("."))
    back = load_workload(str(path))
    assert [a.progress_weight for a in back.apps] == [0.0, 2.5] + [1.0] * (len(apps) - 2)
    text = path.read_text()
    bad = tmp_path / f"bad{suffix}"
    if suffix == ".json":
        bad.write_text(text.replace('"progress_weight": 2.5', '"progress_weight": -1', 1))
    else:
        bad.write_text(text.replace("progress_weight: 2.5", "progress_weight: -1", 1))
    with pytest.raises(ThemisError, match=r"apps\[1\]\.progress_weight.*>= 0"):
        load_workload(str(bad))
