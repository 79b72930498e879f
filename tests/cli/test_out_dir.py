"""An output folder holds one run or one comparison, never pieces of several (else, after
the README's examples, ``out/compare/srtf/`` would hold the typed-cluster run and
``out/compare/gavel/`` the default one)."""

from __future__ import annotations

import json
from pathlib import Path

from themis.cli.out_dir import MANIFEST_FILE


def _clusters(out: Path) -> dict[str, str]:
    """Each run folder's cluster, as its summary.json records it."""
    return {
        p.parent.relative_to(out).as_posix(): json.loads(p.read_text())["config"]["cluster"]
        for p in out.rglob("summary.json")
    }


def test_a_comparison_with_other_settings_replaces_the_earlier_one(cli, tiny_trace, tmp_path):
    out = tmp_path / "compare"
    base = ["compare", "--trace", tiny_trace, "-q", "--out", out]
    assert cli(*base, "--cluster", "1x1x4", "--policies", "fifo,las,srtf").code == 0
    (out / "notes.txt").write_text("mine")  # not themis's: left alone
    result = cli(*base, "--cluster", "1x2x4", "--policies", "fifo,srtf", "--seed", "3")
    assert result.code == 0
    assert result.err.startswith(f"themis: note: {out}/ held an earlier run (cluster 1x1x4 ->")
    assert "removed its files (fifo/, las/, srtf/, comparison.json)" in result.err
    assert _clusters(out) == {"fifo": "1x2x4", "srtf": "1x2x4"}
    assert not (out / "las").exists()
    assert (out / "notes.txt").read_text() == "mine"
    runs = json.loads((out / "comparison.json").read_text())["runs"]
    assert [r["policy"] for r in runs] == ["fifo", "srtf"]
    manifest = json.loads((out / MANIFEST_FILE).read_text())
    assert manifest["command"] == "compare" and manifest["runs"] == ["fifo", "srtf"]
    assert manifest["settings"]["cluster"] == "1x2x4" and manifest["settings"]["seed"] == 3


def test_the_same_command_again_replaces_its_own_files_silently(cli, tiny_trace, tmp_path):
    args = ["compare", "--trace", tiny_trace, "--cluster", "1x1x4", "-q", "--out", tmp_path]
    assert cli(*args, "--policies", "fifo,las").code == 0
    result = cli(*args, "--policies", "fifo,las")
    assert (result.code, result.err) == (0, "")
    assert _clusters(tmp_path) == {"fifo": "1x1x4", "las": "1x1x4"}


def test_seeds_then_one_seed_and_simulate_over_compare(cli, tiny_trace, tmp_path):
    base = ["--trace", tiny_trace, "--cluster", "1x1x4", "-q", "--out", tmp_path]
    assert cli("compare", *base, "--policies", "fifo,las", "--seeds", "2").code == 0
    assert set(_clusters(tmp_path)) == {"seed0/fifo", "seed0/las", "seed1/fifo", "seed1/las"}
    assert cli("compare", *base, "--policies", "fifo").code == 0
    assert set(_clusters(tmp_path)) == {"fifo"} and not (tmp_path / "seed0").exists()
    result = cli("simulate", *base, "--policy", "las")
    assert result.code == 0 and "(themis compare)" in result.err
    assert set(_clusters(tmp_path)) == {"."} and not (tmp_path / "comparison.json").exists()


def test_a_folder_from_before_the_manifest_is_recognised(cli, tiny_trace, tmp_path):
    old = tmp_path / "gavel"
    old.mkdir()
    (old / "summary.json").write_text('{"config": {"cluster": "9x9x9"}}')
    (old / "apps.csv").write_text("app_id\n")
    args = ["compare", "--trace", tiny_trace, "--cluster", "1x1x4", "--policies", "fifo"]
    result = cli(*args, "-q", "--out", tmp_path)
    assert result.code == 0 and "written by an older themis" in result.err
    assert _clusters(tmp_path) == {"fifo": "1x1x4"} and not old.exists()
