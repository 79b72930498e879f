"""Prometheus metrics of the arbiter (``GET /metrics``, admin token).

One registry per arbiter (not the process-global one, so tests can run several):

- ``themis_app_gpus{app}``: GPUs held per app (jobs with a live lease);
- ``themis_app_rho{app}``: each active app's estimated finish-time fairness rho with
  what it holds (capped at the estimator's maximum for an app holding nothing);
- ``themis_leases_granted_total``, ``themis_leases_renewed_total``,
  ``themis_leases_preempted_total`` (ended against the job's will: lease not renewed,
  preempted, released, node lost), ``themis_jobs_killed_total`` (ignored a stop past
  the grace period);
- ``themis_jobs_start_timeouts_total``: jobs stopped because they had not reached their
  training function within the start deadline (``--start-timeout``);
- ``themis_checkpoints_refused_total{why}``: checkpoints a job refused to resume from
  (``unsafe``: not a regular file within the size limit; ``invalid``: a bad seal;
  ``stale``: older than the arbiter's count; ``newer``: past the budget);
  ``themis_trial_resets_total``: trials whose count of steps done was reset down to the
  step their job resumed from (checkpoint refused or missing);
- ``themis_queue_apps``: apps submitted and not admitted yet; ``themis_waiting_trials``:
  trials of active apps that want GPUs and hold none;
- ``themis_round_seconds``: how long one scheduling round takes (histogram);
- ``themis_arbiter_heartbeat_seconds``: wall clock of the scheduling loop's last tick;
- ``themis_loop_faults_total{where}``: exceptions the scheduling loop caught and logged
  instead of dying (``command``: a request refused; ``admit``: an app failed at
  admission; ``tick``: the rest of a tick skipped, the next one runs; ``restart_cost``:
  the policy refused the measured restart cost and keeps the last one);
- ``themis_auctions_limited``: auctions that hit their deadline before proving their
  allocation optimal; ``themis_auction_gap_max``: the largest certified gap among them
  (log-utility units; docs/auction.md);
- ``themis_log_lines_limited_total{app,why}``: app log lines not kept as written
  (``cut``: longer than the line limit; ``rate``: over the app's lines or bytes per
  second; ``queue``: the log writer's queue full; ``pruned``: deleted from the state past
  the app's cap; ``state/log_writer.py``);
- ``themis_state_faults_total``: times the state database was found damaged (a corrupt
  page, not a database, an I/O error, a full disk): the API answers 503 and the loop stops;
- ``themis_restart_cost_seconds``: the restart cost the policy was last told (the
  cluster's observed estimate, ``loop/restart_cost.py``);
- ``themis_ray_up``: 1 while the arbiter reaches Ray, 0 while Ray is unreachable (the
  arbiter goes on without GPUs); ``themis_ray_lost_total``: times Ray was lost.
"""

from __future__ import annotations

import contextlib

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest


class ArbiterMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.gpus = Gauge("themis_app_gpus", "GPUs held per app", ["app"], registry=r)
        self.rho = Gauge("themis_app_rho", "Estimated rho per active app", ["app"], registry=r)
        self.granted = Counter("themis_leases_granted", "Leases granted", registry=r)
        self.renewed = Counter("themis_leases_renewed", "Leases renewed", registry=r)
        self.preempted = Counter(
            "themis_leases_preempted", "Leases ended against the job's will", registry=r
        )
        self.killed = Counter("themis_jobs_killed", "Jobs killed after the grace", registry=r)
        self.start_timeouts = Counter(
            "themis_jobs_start_timeouts",
            "Jobs stopped for not reaching their function within the start deadline",
            registry=r,
        )
        self.checkpoints_refused = Counter(
            "themis_checkpoints_refused",
            "Checkpoints a job refused to resume from",
            ["why"],
            registry=r,
        )
        self.trial_resets = Counter(
            "themis_trial_resets",
            "Trials whose steps done were reset down to where their job resumed",
            registry=r,
        )
        self.queue = Gauge("themis_queue_apps", "Apps submitted, not admitted", registry=r)
        self.waiting = Gauge(
            "themis_waiting_trials", "Trials wanting GPUs and holding none", registry=r
        )
        self.round_seconds = Histogram(
            "themis_round_seconds",
            "Duration of one scheduling round",
            buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0),
            registry=r,
        )
        self.heartbeat = Gauge(
            "themis_arbiter_heartbeat_seconds", "Wall clock of the last tick", registry=r
        )

        self.restart_cost = Gauge(
            "themis_restart_cost_seconds", "Restart cost the policy was last told", registry=r
        )
        self.ray_up = Gauge("themis_ray_up", "1 while the arbiter reaches Ray, else 0", registry=r)
        self.ray_lost = Counter("themis_ray_lost", "Times Ray became unreachable", registry=r)
        self.faults = Counter(
            "themis_loop_faults",
            "Exceptions the scheduling loop caught, logged and survived",
            ["where"],
            registry=r,
        )

        self.log_limited = Counter(
            "themis_log_lines_limited",
            "App log lines cut, dropped or pruned by the log limits",
            ["app", "why"],
            registry=r,
        )
        self.state_faults = Counter(
            "themis_state_faults", "Times the state database was found damaged", registry=r
        )

        self.auctions_limited = Gauge(
            "themis_auctions_limited", "Auctions that hit their deadline", registry=r
        )
        self.auction_gap = Gauge(
            "themis_auction_gap_max", "Largest certified gap of those auctions", registry=r
        )

    def auction_figures(self, report: dict[str, float]) -> None:
        """The policy's auction figures (``Policy.report``; absent: nothing to set)."""
        if "auctions_limited" in report:
            self.auctions_limited.set(report["auctions_limited"])
            self.auction_gap.set(report.get("auction_gap_max", 0.0))

    def forget_app(self, app_id: str) -> None:
        """An ended app's series go away (its last values are in the status table)."""
        for gauge in (self.gpus, self.rho):
            with contextlib.suppress(KeyError):
                gauge.remove(app_id)

    def log_limited_count(self, app_id: str, why: str, lines: int) -> None:
        """The log writer's counts (``state/log_writer.py``); kept after the app ends, as
        its log can still be pruned."""
        self.log_limited.labels(app_id, why).inc(lines)

    def render(self) -> bytes:
        return generate_latest(self.registry)
