"""Ingest: MQTT readings -> validation -> a durable store (SQLite, InfluxDB 1.x or 2.x) -> ack.

Design (acknowledge after the durable write, shared subscriptions, late/retained data, dead
letters, metrics, broker limits): ``docs/ingest.md``.

Modules (one job each):

* :mod:`stormwatch.ingest.validate`      -- typed checks of one MQTT message against the site configuration.
* :mod:`stormwatch.ingest.consumer`      -- the MQTT consumer: batch, write, *then* acknowledge.
* the stores it writes to live in :mod:`stormwatch.stores` (one package for ingest, alerts,
  importers, web and reports).
* :mod:`stormwatch.ingest.metrics`       -- Prometheus metrics of a running consumer over HTTP.
* :mod:`stormwatch.ingest.cli`           -- ``stormwatch ingest``.
"""
