"""The baselines' own settings (``--tiresias-queues``, ``--tiresias-promote-knob``,
``--gandiva-slice``) reach the policies, are recorded in the run's settings, and bad values
are user errors naming the flag."""

from __future__ import annotations

from typing import Any

import pytest

from themis.cli.run_options import make_config
from themis.errors import ThemisError
from themis.policies import make_policy


def config(**kw: Any):
    return make_config(
        **kw,
    )


def test_defaults_are_the_authors_runs() -> None:
    c = config()
    tiresias = make_policy("tiresias", c.options)
    gandiva = make_policy("gandiva", c.options)
    assert tiresias.thresholds == (3250.0, 7200.0)  # type: ignore[attr-defined]
    assert tiresias.promote_knob == float("inf")  # type: ignore[attr-defined]
    assert gandiva.slice == 60.0  # type: ignore[attr-defined]
    assert c.to_dict()["gandiva_slice_s"] == 60.0
    assert "tiresias_queues" not in c.to_dict()


def test_settings_reach_the_policies_and_the_record() -> None:
    c = config(tiresias_queues="3600", tiresias_promote_knob=8.0, gandiva_slice=600.0)
    tiresias = make_policy("tiresias", c.options)
    assert (tiresias.thresholds, tiresias.promote_knob) == ((3600.0,), 8.0)  # type: ignore[attr-defined]
    assert make_policy("gandiva", c.options).slice == 600.0  # type: ignore[attr-defined]
    record = c.to_dict()
    assert (record["tiresias_queues"], record["tiresias_promote_knob"]) == ([3600.0], 8.0)
    assert record["gandiva_slice_s"] == 600.0


@pytest.mark.parametrize(
    ("kw", "flag"),
    [
        ({"tiresias_queues": "7200,3250"}, "--tiresias-queues"),
        ({"tiresias_queues": "0"}, "--tiresias-queues"),
        ({"tiresias_queues": "1h"}, "--tiresias-queues"),
        ({"tiresias_promote_knob": 0.0}, "--tiresias-promote-knob"),
        ({"gandiva_slice": 0.0}, "--gandiva-slice"),
        ({"gandiva_slice": float("inf")}, "--gandiva-slice"),
    ],
)
def test_bad_values_name_the_flag(kw: dict[str, Any], flag: str) -> None:
    with pytest.raises(ThemisError) as err:
        config(**kw)
    assert err.value.field == flag


def test_gavel_resolve_reaches_gavel_and_is_recorded() -> None:
    assert make_policy("gavel", config().options).resolve == "simulator"  # type: ignore[attr-defined]
    c = config(gavel_resolve="cluster")
    assert make_policy("gavel", c.options).resolve == "cluster"  # type: ignore[attr-defined]
    assert make_policy("gavel-mmf", c.options).resolve == "cluster"  # type: ignore[attr-defined]
    assert c.to_dict()["gavel_resolve"] == "cluster"
