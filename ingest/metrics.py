"""Prometheus metrics of a running :class:`stormwatch.ingest.consumer.Ingest` over HTTP (prometheus-client).

The collector reads the consumer's own counters at scrape time (no second bookkeeping), into a
registry of its own (no process-global state). Every metric name starts ``stormwatch_ingest_``.

The design: docs/ingest.md ("The modules", `ingest/metrics.py`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

    from stormwatch.ingest.consumer import Ingest

PREFIX = "stormwatch_ingest_"


class IngestCollector(Collector):
    """Exposes the counters of one :class:`~stormwatch.ingest.consumer.Ingest`."""

    def __init__(self, ingest: Ingest) -> None:
        self.ingest = ingest

    def collect(self) -> Iterator[Metric]:
        ing = self.ingest
        for name, doc, value in (
            ("received", "MQTT messages delivered by the broker", ing.received),
            ("written", "readings newly stored (live and late)", ing.written),
            ("late", "readings stored flagged late (retained or stale)", ing.late),
            ("duplicates", "readings the store already held", ing.duplicates),
            ("acked", "messages acknowledged after a durable write", ing.acked),
            ("confirmations", "stored-acknowledgements published to gateways", ing.confirmations),
            ("retries", "store retries (failed batch writes and HTTP retries)", ing.store_retries),
            ("mqtt_connects", "MQTT connections the broker accepted", ing.session.connects),
            ("mqtt_disconnects", "MQTT connections lost (a deliberate stop not counted)", ing.session.losses),
            ("mqtt_session_takeovers", "MQTT connections lost to another client with the same client id",
             ing.session.takeovers),
            ("mqtt_dead_connections", "MQTT connections found dead by the keep-alive check", ing.session.dead_links),
        ):
            yield CounterMetricFamily(PREFIX + name, doc, value=value)
        dead = CounterMetricFamily(PREFIX + "dead_lettered", "dead letters by reason", labels=["reason"])
        for reason, count in sorted(dict(ing.dead_lettered).items()):
            dead.add_metric([reason], count)
        yield dead
        yield GaugeMetricFamily(PREFIX + "unacked", "messages delivered and not yet acknowledged", value=ing.unacked)
        lag = ing.lag_s()
        if lag is not None:
            yield GaugeMetricFamily(PREFIX + "lag_seconds",
                                    "clock now minus the event time of the newest live reading written", value=lag)


def serve_metrics(ingest: Ingest, port: int, addr: str = "127.0.0.1") -> WSGIServer:
    """Serve ``/metrics`` for ``ingest`` on ``addr:port`` in a daemon thread (``port=0``: any free port).

    Returns:
        The server; ``server.server_port`` is the bound port, ``server.shutdown()`` stops it.

    Raises:
        OSError: the port cannot be bound.
    """
    registry = CollectorRegistry(auto_describe=False)
    registry.register(IngestCollector(ingest))
    server, _thread = start_http_server(port, addr=addr, registry=registry)
    return server
