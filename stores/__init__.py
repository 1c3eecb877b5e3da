"""Stores: where readings, events, dead letters and sites are kept -- ONE package for every service
that writes or reads them (ingest, alerts, importers, the web desk, reports).

* :mod:`stormwatch.stores.base`         -- the :class:`~stormwatch.stores.base.ReadingStore` protocol every
  sink implements, :class:`~stormwatch.stores.base.DeadLetter`, :class:`~stormwatch.stores.base.StoreError`.
* :mod:`stormwatch.stores.urls`         -- ``open_store(url)``: a store from its URL (``sqlite:``,
  ``influx1://``, ``influx2://``).
* :mod:`stormwatch.stores.sqlite`       -- the embedded SQLite store (default).
* :mod:`stormwatch.stores.influx1`, :mod:`stormwatch.stores.influx2` -- InfluxDB 1.x over HTTP, 2.x through
  influxdb-client; their shared write side :mod:`stormwatch.stores.influxwrite` (batching, bisecting with
  :mod:`stormwatch.stores.splitwrite`), :mod:`stormwatch.stores.lineprotocol` (schema:
  ``docs/influxdb-schema.md``) and :mod:`stormwatch.stores.rows` (stored rows back into readings).

Adding a sink: a module here implementing the protocol, its URL scheme in :mod:`stormwatch.stores.urls`,
and its ``Subject`` in ``tests/stores/test_conformance.py`` (the suite every store passes).
"""
