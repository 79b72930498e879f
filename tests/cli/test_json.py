"""``--json``: one JSON document on stdout and nothing else, its schema as the README
documents it ("Machine-readable output"); ``status --watch`` refreshes until Ctrl-C."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from themis.cli import runtime as runtime_cli
from themis.errors import ThemisError
from themis.reports.metrics import RunSummary

ROOT = Path(__file__).parents[2]
SUMMARY_KEYS = set(RunSummary.__dataclass_fields__)


def test_simulate_json(cli, tiny_trace, tmp_path) -> None:
    out = tmp_path / "o"
    result = cli("simulate", "--trace", tiny_trace, "--cluster", "1x1x4", "--policy", "fifo",
                 "--out", out, "-q", "--json")  # fmt: skip
    assert result.code == 0, result.err
    doc = json.loads(result.out)  # stdout is the document alone
    assert set(doc) == {"workload", "config", "out", "summary"}
    assert doc["out"] == str(out) and doc["config"]["policy"] == "fifo"
    assert set(doc["summary"]) == SUMMARY_KEYS
    written = json.loads((out / "summary.json").read_text())
    assert doc["summary"] == {k: v for k, v in written.items() if k not in ("config", "options")}
    assert "tiny.csv: 3 apps" in doc["workload"]
    assert f"wrote {out}/" in result.err  # the person's lines moved to stderr


def test_compare_json_one_seed_and_seeds(cli, tiny_trace, tmp_path) -> None:
    base = ["compare", "--trace", tiny_trace, "--cluster", "1x1x4", "--policies", "fifo,las",
            "-q", "--json"]  # fmt: skip
    result = cli(*base, "--out", tmp_path / "a")
    assert result.code == 0, result.err
    doc = json.loads(result.out)
    assert set(doc) == {"workload", "config", "runs", "out", "report"}
    assert [r["policy"] for r in doc["runs"]] == ["fifo", "las"]
    assert all(set(r) == SUMMARY_KEYS for r in doc["runs"])
    assert doc["report"] is None and len(doc["workload"]) == 1
    on_disk = json.loads((tmp_path / "a" / "comparison.json").read_text())
    assert {k: doc[k] for k in ("config", "runs")} == on_disk

    result = cli(*base, "--out", tmp_path / "b", "--seeds", "2", "--report", tmp_path / "r")
    assert result.code == 0, result.err
    doc = json.loads(result.out)
    assert set(doc) == {"workload", "config", "runs", "aggregate", "out", "report"}
    assert doc["config"]["seeds"] == [0, 1] and len(doc["workload"]) == 2
    assert [(r["seed"], r["policy"]) for r in doc["runs"]] == [
        (0, "fifo"), (0, "las"), (1, "fifo"), (1, "las")
    ]  # fmt: skip
    assert set(doc["aggregate"]) == {"fifo", "las"}
    assert doc["report"] == str(tmp_path / "r" / "report.html")


def test_auction_json_is_its_usual_output(cli) -> None:
    plain = cli("auction", ROOT / "examples" / "auction_2x2.json")
    flagged = cli("auction", ROOT / "examples" / "auction_2x2.json", "--json")
    assert flagged.code == plain.code == 0
    assert flagged.out == plain.out
    assert set(json.loads(plain.out)) == {
        "apps", "leftover", "limited", "limit", "gap", "gap_relative", "resolve_gap",
        "objective", "work",
    }  # fmt: skip


def test_trace_inspect_json(cli, tiny_trace) -> None:
    result = cli("trace", "inspect", tiny_trace, "--json")
    assert result.code == 0
    doc = json.loads(result.out)
    assert doc["apps"] == 3 and doc["jobs"] == 5


STATUS = {
    "arbiter": {"state": "alive", "age": 0.4, "started": 0.0, "gpus": 4, "machines": 1,
                "rounds": 7, "ray_down_since": None, "ray_error": None},
    "apps": [{"app_id": "a1", "state": "running", "rho": 1.2, "gpus": 2, "leases": 1,
              "alive": 1, "stopped_early": 0, "finished": 0, "failed": 0, "steps_done": 5,
              "steps_total": 10, "why": None}],
}  # fmt: skip


class FakeClient:
    """Answers ``status`` with STATUS; after ``limit`` answers, Ctrl-C."""

    def __init__(self, limit: int = 10, state: str = "alive", unreachable=()) -> None:
        self.calls, self.limit, self.state = 0, limit, state
        self.unreachable = set(unreachable)

    def status(self) -> dict:
        if self.calls >= self.limit:
            raise KeyboardInterrupt
        self.calls += 1
        if self.calls in self.unreachable:
            raise ThemisError("no arbiter answers at http://x")
        answer = json.loads(json.dumps(STATUS))
        answer["arbiter"]["state"] = self.state
        answer["apps"][0]["steps_done"] = self.calls
        return answer


@pytest.fixture
def fake(monkeypatch):
    def install(client: FakeClient) -> FakeClient:
        monkeypatch.setattr(runtime_cli, "_client", lambda server, token: client)
        monkeypatch.setattr(runtime_cli.time, "sleep", lambda s: None)
        return client

    return install


def test_status_json_is_the_apis_answer(cli, fake) -> None:
    fake(FakeClient())
    result = cli("status", "--json", "--server", "http://x", "--token", "t")
    assert result.code == 0, result.err
    assert json.loads(result.out)["apps"][0]["app_id"] == "a1"
    fake(FakeClient(state="stalled"))
    result = cli("status", "--json", "--server", "http://x", "--token", "t")
    assert result.code == 3 and json.loads(result.out)["arbiter"]["state"] == "stalled"


def test_status_watch_refreshes_until_ctrl_c(cli, fake) -> None:
    client = fake(FakeClient(limit=3))
    result = cli("status", "--json", "--watch", "--server", "http://x", "--token", "t")
    assert result.code == 0 and client.calls == 3
    lines = result.out.splitlines()  # JSON Lines: one answer per refresh
    assert [json.loads(line)["apps"][0]["steps_done"] for line in lines] == [1, 2, 3]
    fake(FakeClient(limit=2))
    result = cli("status", "--watch", "--server", "http://x", "--token", "t")
    assert result.code == 0 and result.out.count("arbiter alive at http://x") == 2


def test_status_watch_reports_an_arbiter_that_stops_answering_and_goes_on(cli, fake) -> None:
    client = fake(FakeClient(limit=3, unreachable={2}))
    result = cli("status", "--json", "--watch", "--every", "1", "--server", "http://x")
    assert result.code == 0 and client.calls == 3
    assert [json.loads(line)["apps"][0]["steps_done"] for line in result.out.splitlines()] == [
        1,
        3,
    ]
    assert result.err == (
        "themis: no arbiter answers at http://x; asking again every 1 s\n"
        "themis: the arbiter answers again\n"
    )
    # Gone for good: said once, not at every refresh.
    client = fake(FakeClient(limit=6, unreachable={2, 3, 4, 5, 6}))
    result = cli("status", "--json", "--watch", "--every", "1", "--server", "http://x")
    assert client.calls == 6 and result.code == 3
    assert result.err.count("no arbiter answers") == 1, result.err
    fake(FakeClient(limit=3, unreachable={3}))  # not answering at the end: exit code 3
    assert cli("status", "--watch", "--server", "http://x").code == 3
    fake(FakeClient(unreachable={1}))  # without --watch: the usual one-line error
    result = cli("status", "--server", "http://x")
    assert result.code == 2 and "no arbiter answers" in result.err


def test_policies_json_lists_every_registered_policy(cli) -> None:
    from themis.policies import policy_names

    result = cli("policies", "--json")
    assert result.code == 0, result.err
    doc = json.loads(result.out)
    assert [p["name"] for p in doc["policies"]] == policy_names()
    assert all(p["description"] for p in doc["policies"]) and doc["broken"] == []


class FakeRuntime:
    """Answers submit and logs as the API does."""

    def submit(self, app_file) -> dict:
        return {"app_id": "mlp-sweep", "trials": 8, "token": "tok", "replayed": False}

    def logs(self, app: str, after: int) -> dict:
        if after:
            return {"lines": [], "last": after, "state": "finished"}
        return {"lines": ["admitted", "t000 said \x1b[2J"], "last": 2, "state": "finished"}


def test_submit_and_logs_json(cli, monkeypatch) -> None:
    monkeypatch.setattr(runtime_cli, "_client", lambda server, token: FakeRuntime())
    result = cli("submit", "--json", "--server", "http://x", "--token", "t", "app.yaml")
    assert result.code == 0, result.err
    assert json.loads(result.out) == {
        "app_id": "mlp-sweep",
        "trials": 8,
        "token": "tok",
        "replayed": False,
    }
    result = cli("logs", "--json", "--server", "http://x", "--token", "t", "mlp-sweep")
    assert result.code == 0, result.err
    lines = [json.loads(line) for line in result.out.splitlines()]
    assert lines == [
        {"app": "mlp-sweep", "line": "admitted"},
        {"app": "mlp-sweep", "line": "t000 said \x1b[2J"},
    ]
    assert "\x1b" not in result.out  # JSON escapes it


EXAMPLE_APP = Path(__file__).parents[2] / "examples" / "mlp_sweep" / "app.yaml"


def test_submit_dry_run_checks_the_file_and_submits_nothing(cli, monkeypatch, tmp_path) -> None:
    def no_server(server, token):
        raise AssertionError("a dry run must not reach the server")

    monkeypatch.setattr(runtime_cli, "_client", no_server)
    result = cli("submit", "--dry-run", str(EXAMPLE_APP))
    assert result.code == 0, result.err
    assert "valid: app 'mlp-sweep'" in result.out and "nothing submitted" in result.out
    assert result.out.count("\n  t0") >= 1
    result = cli("submit", "--dry-run", "--json", str(EXAMPLE_APP))
    doc = json.loads(result.out)
    assert doc["valid"] is True and doc["app"]["name"] == "mlp-sweep"
    bad = tmp_path / "app.yaml"
    bad.write_text(EXAMPLE_APP.read_text().replace("trials:", "trials: -3\nold_trials:", 1))
    result = cli("submit", "--dry-run", str(bad))
    assert result.code == 2 and result.err.count("\n") == 1, result.err
    assert str(bad) in result.err


@pytest.mark.parametrize("width", [80, 120])
def test_status_fits_the_terminal_and_never_cuts_a_figure(capsys, width: int) -> None:
    row = dict(STATUS["apps"][0])
    rows = [
        {**row, "app_id": "hyperparameter-sweep-of-resnet50-on-imagenet", "steps_done": 123456},
        {**row, "app_id": "b", "why": "waiting for the next round (4 GPUs free); " * 3},
    ]
    runtime_cli._print_table(rows, width=width)
    out = capsys.readouterr().out
    assert max(len(line.rstrip()) for line in out.splitlines()) <= width
    assert "…" not in out
    assert f"123456/{row['steps_total']}" in out  # a figure is never wrapped or cut
    assert "hyperparam" in out and "…" not in out  # a long name folds, never cut
    assert "b: waiting for the next round" in out or "waiting for the next" in out
