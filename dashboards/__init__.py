"""Grafana dashboards as code (grafana-foundation-sdk, Grafana 11) for the SMO's view.

* :mod:`stormwatch.dashboards.influxql` -- the typed InfluxQL query (the SDK has no InfluxDB query type).
* :mod:`stormwatch.dashboards.site` -- site overview; :mod:`stormwatch.dashboards.portfolio` -- all sites.
* :mod:`stormwatch.dashboards.build` -- render to ``dashboards/json/<uid>.json``; ``stormwatch dashboards build``.
"""
