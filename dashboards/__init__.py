"""Grafana dashboards as code (grafana-foundation-sdk, Grafana 11) for the SMO's view.

* :mod:`dashboards.influxql` -- the typed InfluxQL query (the SDK has no InfluxDB query type).
* :mod:`dashboards.site` -- site overview; :mod:`dashboards.portfolio` -- all sites.
* :mod:`dashboards.build` -- render to ``dashboards/json/<uid>.json``; ``stormwatch dashboards build``.
"""
