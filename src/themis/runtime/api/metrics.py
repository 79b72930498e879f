"""The API's own Prometheus metrics, on the arbiter's registry (``GET /metrics``):

- ``themis_api_rate_limited_total{role}``: requests answered 429 (``api.ratelimit``);
- ``themis_api_snapshot_builds_total``: times the shared read snapshot was rebuilt from
  the store (``api.snapshot``; at most one per ``SNAPSHOT_MAX_AGE`` plus one per write
  made through the API);
- ``themis_api_connections``: HTTP connections open now; ``themis_api_connections_max``:
  the limit past which the slowest half-open one is closed;
- ``themis_api_connections_closed_total{why}``: connections the server closed itself:
  ``header_timeout`` (a request's headers not complete in time: slowloris),
  ``over_limit`` (closed to make room for a new connection, the oldest still sending
  headers first; or refused when none was);
- ``themis_api_requests_refused_total``: requests answered 503 because
  ``themis_api_requests_max`` were already in flight.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge


class ApiMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        r = registry
        self.rate_limited = Counter(
            "themis_api_rate_limited", "Requests answered 429", ["role"], registry=r
        )
        self.snapshot_builds = Counter(
            "themis_api_snapshot_builds", "Rebuilds of the shared read snapshot", registry=r
        )
        self.connections = Gauge("themis_api_connections", "HTTP connections open", registry=r)
        self.connections_max = Gauge(
            "themis_api_connections_max", "HTTP connections allowed at once", registry=r
        )
        self.closed = Counter(
            "themis_api_connections_closed",
            "Connections the server closed itself",
            ["why"],
            registry=r,
        )
        self.requests_max = Gauge(
            "themis_api_requests_max", "Requests served at once (more: 503)", registry=r
        )
        self.refused = Counter(
            "themis_api_requests_refused", "Requests answered 503 over the limit", registry=r
        )
