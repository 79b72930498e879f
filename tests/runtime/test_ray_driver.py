"""The arbiter's Ray driver process (``ray_driver.RayDriver``) without a cluster: a
cluster that cannot be joined is one clear error at start-up, and no process is left."""

from __future__ import annotations

import time

import psutil
import pytest

from themis.errors import ThemisError
from themis.runtime.workers.ray_driver import DriverOptions, RayDriver, RayUnreachable


@pytest.mark.timeout(90)
def test_an_address_nobody_answers_is_one_error_and_leaves_no_process() -> None:
    before = {c.pid for c in psutil.Process().children(recursive=True)}
    driver = RayDriver("127.0.0.1:1", grace=1.0, options=DriverOptions(connect_timeout=4.0))
    assert driver.ray_down
    with pytest.raises(RayUnreachable):
        driver.nodes()
    started = time.monotonic()
    with pytest.raises(ThemisError) as info:
        driver.wait_connected(timeout=60)
    assert time.monotonic() - started < 30
    assert "could not join 127.0.0.1:1" in info.value.format()
    assert "\n" not in info.value.format()
    time.sleep(0.5)
    spawned = [
        c
        for c in psutil.Process().children(recursive=True)
        if c.pid not in before and "spawn_main" in " ".join(c.cmdline())
    ]
    assert spawned == []


@pytest.mark.timeout(90)
def test_jobs_started_while_ray_is_unreachable_end_at_once_as_lost() -> None:
    from themis.runtime.workers.lease import TrialSpec

    driver = RayDriver("127.0.0.1:1", grace=1.0, options=DriverOptions(connect_timeout=60.0))
    try:
        spec = TrialSpec("app", "t000", "tok", "m:f", "/", {}, 10, "/tmp/x.pkl", 5)
        job = driver.start(spec, [("node", 1)])
        assert driver.collect_polls([job]) == []
        ((ended, outcome, why),) = driver.collect_ends([job])
        assert ended is job and outcome is None and why.startswith("Ray unreachable")
        driver.release(job)
        assert driver.jobs == {}
    finally:
        driver.close()
