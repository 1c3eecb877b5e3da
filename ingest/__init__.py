"""Ingest: MQTT readings -> validation -> a durable store (SQLite, InfluxDB 1.x or 2.x) -> ack.

Design (acknowledge after the durable write, shared subscriptions, late/retained data, dead
letters, metrics, broker limits): ``docs/ingest.md``.

Modules (one job each):

* :mod:`stormwatch.ingest.validate`      -- typed checks of one MQTT message against the site configuration.
* :mod:`stormwatch.ingest.consumer`      -- the MQTT consumer: batch, write, *then* acknowledge.
* :mod:`stormwatch.ingest.sqlite_store`  -- embedded SQLite store (default).
* :mod:`stormwatch.ingest.lineprotocol`  -- InfluxDB line-protocol encoding (schema: ``docs/influxdb-schema.md``).
* :mod:`stormwatch.ingest.influx1`       -- InfluxDB 1.x store over HTTP ``/write`` and ``/query``.
* :mod:`stormwatch.ingest.influx2`       -- InfluxDB 2.x store through ``influxdb-client``.
* :mod:`stormwatch.ingest.splitwrite`    -- split a rejected batch to isolate the bad lines.
* :mod:`stormwatch.ingest.stores`        -- ``open_store(url)``.
* :mod:`stormwatch.ingest.metrics`       -- Prometheus metrics of a running consumer over HTTP.
* :mod:`stormwatch.ingest.cli`           -- ``stormwatch ingest``.
"""
