"""``themis auction``: the 2x2 VGG-vs-ResNet case, output format, and file validation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .conftest import assert_one_line_error

GPUS = {
    "m0g0": {"machine": "m0", "rack": "r0"},
    "m0g1": {"machine": "m0", "rack": "r0"},
    "m1g0": {"machine": "m1", "rack": "r0"},
    "m1g1": {"machine": "m1", "rack": "r0"},
}
MACHINE_0, MACHINE_1 = ["m0g0", "m0g1"], ["m1g0", "m1g1"]
ALL = MACHINE_0 + MACHINE_1


def _bid(one_machine_rho: float) -> dict:
    """rho with one machine is the model's cross-machine factor, with all four GPUs 1/2
    (two new apps, each alone would spread over both machines); nothing: RHO_MAX."""
    return {
        "none": 1e6,
        "menu": [
            {"gpus": MACHINE_0, "rho": one_machine_rho},
            {"gpus": MACHINE_1, "rho": one_machine_rho},
            {"gpus": ALL, "rho": 0.5},
        ],
    }


HAND_CASE = {"gpus": GPUS, "bids": {"vgg": _bid(0.72), "resnet": _bid(0.98)}}


#: Every key of the output document.
KEYS = {
    "apps", "leftover", "limited", "limit", "gap", "gap_relative", "resolve_gap", "objective",
    "work",
}  # fmt: skip


def _write(tmp_path: Path, data, name: str = "auction.json") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data, indent=2))
    return path


def test_vgg_against_resnet_hidden_payments(cli, tmp_path: Path) -> None:
    result = cli("auction", _write(tmp_path, HAND_CASE))
    assert result.code == 0, result.err
    out = json.loads(result.out)
    assert set(out) == KEYS
    assert out["limited"] is False and out["gap"] == 0.0  # proven optimal
    assert out["limit"] is None and out["gap_relative"] == 0.0 and out["resolve_gap"] == 0.0
    vgg, resnet = out["apps"]["vgg"], out["apps"]["resnet"]
    # Proportional fair: one machine each.
    assert sorted([sorted(vgg["choice"]), sorted(resnet["choice"])]) == [MACHINE_0, MACHINE_1]
    # c_vgg = v_resnet(x*) / v_resnet(without vgg) = (1/0.98) / (1/0.5) = 1/1.96; symmetrically.
    assert vgg["c"] == pytest.approx(1 / 1.96, rel=1e-9)
    assert resnet["c"] == pytest.approx(1 / 1.44, rel=1e-9)
    granted = vgg["granted"] + resnet["granted"]
    for app in (vgg, resnet):
        assert set(app["granted"]) <= set(app["choice"])
        assert len(app["granted"]) in (1, 2)  # c * 2 GPUs, rounded without bias
    assert sorted(granted + out["leftover"]) == sorted(ALL)


def test_output_is_indented_json(cli, tmp_path: Path) -> None:
    result = cli("auction", _write(tmp_path, HAND_CASE))
    assert result.out.startswith('{\n  "apps": {\n    "vgg": {')


def test_same_seed_same_rounding_and_seeds_vary_it(cli, tmp_path: Path) -> None:
    path = _write(tmp_path, HAND_CASE)
    runs = {seed: cli("auction", path, "--seed", seed).out for seed in range(12)}
    assert cli("auction", path, "--seed", 3).out == runs[3]
    # ResNet may keep 2 * 0.694 = 1.39 GPUs: 1 or 2 of them, depending on the seed.
    kept = {len(json.loads(o)["apps"]["resnet"]["granted"]) for o in runs.values()}
    assert kept == {1, 2}


def test_app_that_wins_nothing_keeps_c_one(cli, tmp_path: Path) -> None:
    data = {"gpus": GPUS, "bids": {"idle": {"none": 2.0, "menu": []}}}
    out = json.loads(cli("auction", _write(tmp_path, data)).out)
    assert out == {
        "apps": {"idle": {"choice": [], "c": 1.0, "granted": []}},
        "leftover": ALL,
        "limited": False,
        "limit": None,
        "gap": 0.0,
        "gap_relative": 0.0,
        "resolve_gap": 0.0,
        "objective": 0.0,
        "work": 0,
    }


def _variant(change) -> dict:
    data = json.loads(json.dumps(HAND_CASE))
    change(data)
    return data


def _set(path: list, value):
    def change(data):
        target = data
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return change


def _delete(path: list):
    def change(data):
        target = data
        for key in path[:-1]:
            target = target[key]
        del target[path[-1]]

    return change


BAD_FILES = [
    ("missing gpus", _variant(_delete(["gpus"])), "field 'gpus'", "missing"),
    ("missing bids", _variant(_delete(["bids"])), "field 'bids'", "missing"),
    ("empty gpus", _variant(_set(["gpus"], {})), "field 'gpus'", "at least one"),
    ("gpus a list", _variant(_set(["gpus"], ["a"])), "field 'gpus'", "object"),
    (
        "machine not a string",
        _variant(_set(["gpus", "m0g1", "machine"], 3)),
        "field 'gpus.m0g1.machine'",
        "string",
    ),
    (
        "missing rack",
        _variant(_delete(["gpus", "m1g0", "rack"])),
        "field 'gpus.m1g0.rack'",
        "missing",
    ),
    (
        "unknown key",
        _variant(_set(["gpus", "m1g0", "speed"], 1)),
        "field 'gpus.m1g0.speed'",
        "unknown key",
    ),
    (
        "missing none",
        _variant(_delete(["bids", "vgg", "none"])),
        "field 'bids.vgg.none'",
        "missing",
    ),
    (
        "none a string",
        _variant(_set(["bids", "vgg", "none"], "big")),
        "field 'bids.vgg.none'",
        "number",
    ),
    (
        "menu an object",
        _variant(_set(["bids", "resnet", "menu"], {})),
        "field 'bids.resnet.menu'",
        "list",
    ),
    (
        "rho a string",
        _variant(_set(["bids", "vgg", "menu", 1, "rho"], "0.7")),
        "field 'bids.vgg.menu[1].rho'",
        "number",
    ),
    (
        "rho negative",
        _variant(_set(["bids", "vgg", "menu", 1, "rho"], -1)),
        "field 'bids.vgg.menu[1].rho'",
        "> 0",
    ),
    (
        "rho a boolean",
        _variant(_set(["bids", "vgg", "menu", 0, "rho"], True)),
        "field 'bids.vgg.menu[0].rho'",
        "number",
    ),
    (
        "missing rho",
        _variant(_delete(["bids", "resnet", "menu", 2, "rho"])),
        "field 'bids.resnet.menu[2].rho'",
        "missing",
    ),
    (
        "unknown GPU",
        _variant(_set(["bids", "vgg", "menu", 2, "gpus"], ["m0g0", "m9g9"])),
        "field 'bids.vgg.menu[2].gpus[1]'",
        "unknown GPU 'm9g9'",
    ),
    (
        "GPU id a number",
        _variant(_set(["bids", "vgg", "menu", 0, "gpus"], [0])),
        "field 'bids.vgg.menu[0].gpus[0]'",
        "string",
    ),
    (
        "GPU twice",
        _variant(_set(["bids", "vgg", "menu", 0, "gpus"], ["m0g0", "m0g0"])),
        "field 'bids.vgg.menu[0].gpus[1]'",
        "twice",
    ),
    (
        "empty bundle",
        _variant(_set(["bids", "vgg", "menu", 0, "gpus"], [])),
        "field 'bids.vgg.menu[0].gpus'",
        "at least one",
    ),
    (
        "entry a list",
        _variant(_set(["bids", "vgg", "menu", 0], [1])),
        "field 'bids.vgg.menu[0]'",
        "object",
    ),
    ("top level a list", [1, 2], "", "expected an object"),
]


@pytest.mark.parametrize(
    ("data", "where", "what"), [c[1:] for c in BAD_FILES], ids=[c[0] for c in BAD_FILES]
)
def test_bad_file_is_one_line_naming_file_and_json_path(cli, tmp_path, data, where, what) -> None:
    path = _write(tmp_path, data)
    line = assert_one_line_error(cli("auction", path), str(path), where, what)
    assert line.startswith(f"themis: error: {path}")


def test_invalid_json_names_the_line(cli, tmp_path: Path) -> None:
    path = _write(tmp_path, '{"gpus": {"a": {"machine": "m", "rack": "r"}},\n "bids": {,}}\n')
    assert_one_line_error(cli("auction", path), f"{path}:2", "invalid JSON")


def test_duplicate_key_is_rejected(cli, tmp_path: Path) -> None:
    path = _write(
        tmp_path, '{"gpus": {"a": {"machine": "m", "rack": "r"}}, "gpus": {}, "bids": {}}'
    )
    assert_one_line_error(cli("auction", path), str(path), "'gpus' appears twice")


def test_nan_rho_is_rejected(cli, tmp_path: Path) -> None:
    text = json.dumps(HAND_CASE).replace("0.72", "NaN", 1)
    path = _write(tmp_path, text)
    assert_one_line_error(cli("auction", path), "field 'bids.vgg.menu[0].rho'", "finite")


def test_missing_file(cli, tmp_path: Path) -> None:
    assert_one_line_error(cli("auction", tmp_path / "nope.json"), "nope.json", "cannot read")


def test_missing_argument(cli) -> None:
    assert_one_line_error(cli("auction"), "Missing argument")


def test_help_says_machine_and_rack_are_not_used(cli) -> None:
    result = cli("auction", "--help")
    assert result.code == 0
    assert "does not use" in " ".join(result.out.split())


def test_a_node_limit_of_one_answers_with_a_bound(cli, tmp_path: Path) -> None:
    """One search node cannot prove the optimum: the answer is still a feasible auction,
    and says it is limited, with a gap >= 0."""
    result = cli("auction", _write(tmp_path, HAND_CASE), "--node-limit", "1")
    assert result.code == 0, result.err
    out = json.loads(result.out)
    assert out["limited"] is True and out["gap"] >= 0.0
    granted = [g for app in out["apps"].values() for g in app["granted"]]
    assert len(granted) == len(set(granted))
    assert all(0.0 < app["c"] <= 1.0 for app in out["apps"].values())


def _contested(bidders: int) -> dict:
    """``bidders`` apps that all want overlapping pairs of 6 GPUs, at different gains: one
    work unit cannot prove which packing is best."""
    gpus = {f"g{k}": {"machine": f"m{k // 2}", "rack": "r"} for k in range(6)}
    bids = {}
    for b in range(bidders):
        menu = [
            {"gpus": [f"g{(b + k) % 6}", f"g{(b + k + 1) % 6}"], "rho": 1.0 + 0.1 * b + 0.01 * k}
            for k in range(3)
        ]
        bids[f"app{b}"] = {"none": 10.0, "menu": menu}
    return {"gpus": gpus, "bids": bids}


def test_a_limited_auction_reports_its_limit_and_certified_gap(cli, tmp_path: Path) -> None:
    """Stopped on its work limit: ``limit`` says which, the gap is consistent with the
    objective (relative = gap / bound), the work spent is reported, and stderr says so in
    a line for people."""
    result = cli("auction", _write(tmp_path, _contested(5)), "--node-limit", "1")
    assert result.code == 0, result.err
    out = json.loads(result.out)
    assert set(out) == KEYS
    assert out["limited"] is True and out["limit"] == "work"
    bound = out["objective"] + out["gap"]
    assert out["gap"] >= 0.0 and out["gap_relative"] == pytest.approx(out["gap"] / bound)
    assert out["resolve_gap"] >= 0.0 and out["work"] >= 1
    assert "stopped on its work limit" in result.err and "certified gap" in result.err


def test_a_proven_auction_says_so_on_stderr(cli, tmp_path: Path) -> None:
    result = cli("auction", _write(tmp_path, HAND_CASE))
    out = json.loads(result.out)
    assert out["work"] >= 1 and out["limit"] is None
    assert (
        result.err.strip()
        == f"auction: 2 bidders, 2 winners; proven optimal, {out['work']} work units"
    )


def test_a_deadline_that_passes_is_reported_as_the_limit(cli, tmp_path: Path) -> None:
    """A deadline far too short for the auction (1 us): the answer is still feasible and
    names the deadline; with no work limit (``--node-limit 0``) ``work`` is null."""
    path = _write(tmp_path, _contested(6))
    result = cli("auction", path, "--node-limit", "0", "--deadline", "1e-6")
    assert result.code == 0, result.err
    out = json.loads(result.out)
    assert out["limited"] is True and out["limit"] == "deadline" and out["work"] is None
    assert "stopped on its deadline" in result.err


def test_bad_limits_are_one_line_errors(cli, tmp_path: Path) -> None:
    path = _write(tmp_path, HAND_CASE)
    for args, field in (
        (("--node-limit", "-1"), "--node-limit"),
        (("--deadline", "0"), "--deadline"),
    ):
        result = cli("auction", path, *args)
        assert result.code != 0
        assert field in result.err
