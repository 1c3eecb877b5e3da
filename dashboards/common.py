"""Pieces shared by the stormwatch dashboards: variables, thresholds, the events annotation.

The design: docs/dashboards.md ("The modules", `dashboards/common.py`).
"""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as dash
from grafana_foundation_sdk.models import dashboard as model

from stormwatch.alerts.packs import load_pack
from stormwatch.alerts.rules.basin import BasinRule
from stormwatch.alerts.rules.storm import StormRule
from stormwatch.dashboards.influxql import DATASOURCE, InfluxAnnotation

#: Rule pack whose thresholds the dashboards draw (the example site's jurisdiction).
DEFAULT_PACK = "ch133"

#: InfluxQL condition selecting readings without any QC flag (ingest writes ``flags`` on every
#: reading, ``""`` when clean: docs/influxdb-schema.md) -- the rules' filter (module docstring).
CLEAN = "\"flags\" = ''"

#: The zone of ``$site``, recorded by ingest from the site file (docs/influxdb-schema.md ``sites``).
SITE_ZONE = 'SHOW TAG VALUES FROM "sites" WITH KEY = "timezone" WHERE "site" = \'$site\''

#: Events query behind the annotations (docs/influxdb-schema.md, measurement ``events``).
EVENTS_ANNOTATION = """SELECT "title", "text", "kind" FROM "events" WHERE "site" = '$site' AND $timeFilter"""


def pack_thresholds(pack: str = DEFAULT_PACK) -> tuple[float, float]:
    """``(storm threshold in inches, cleanout fraction)`` of rule pack ``pack`` (R1 and R3).

    Raises:
        stormwatch.alerts.packs.PackError: unknown or invalid pack.
        ValueError: the pack lacks a storm or basin rule.
    """
    rules = load_pack(pack)
    storm, basin = rules.first(StormRule), rules.first(BasinRule)
    if storm is None or basin is None:
        raise ValueError(f"rule pack {pack!r} has no storm (R1) or basin (R3) rule")
    return float(storm[1].threshold), basin[1].cleanout_fraction


def thresholds(limit: float, below: str = "green", above: str = "red") -> dash.ThresholdsConfig:
    """Absolute thresholds: ``below`` under ``limit``, ``above`` from it."""
    return dash.ThresholdsConfig().mode(model.ThresholdsMode.ABSOLUTE).steps([
        model.Threshold(value=None, color=below),
        model.Threshold(value=limit, color=above),
    ])


def custom_variable(name: str, label: str, options: list[tuple[str, str]]) -> dash.CustomVariable:
    """A custom variable ``name`` with ``(text, value)`` options; the first is the default."""
    text, value = options[0]
    return (
        dash.CustomVariable(name)
        .label(label)
        .values(", ".join(f"{t} : {v}" for t, v in options))
        .current(model.VariableOption(selected=True, text=text, value=value))
        .options([model.VariableOption(selected=i == 0, text=t, value=v) for i, (t, v) in enumerate(options)])
    )


def tz_variable() -> dash.QueryVariable:
    """``$tz``: the IANA time zone of ``$site`` (its site file's ``site.timezone``, recorded by
    ingest), refreshed whenever ``$site`` changes; for daily totals by local day (InfluxQL ``tz()``)."""
    return (
        dash.QueryVariable("tz")
        .label("site time zone")
        .datasource(DATASOURCE)
        .query(SITE_ZONE)
        .refresh(model.VariableRefresh.ON_DASHBOARD_LOAD)
        .sort(model.VariableSort.ALPHABETICAL_ASC)
    )


def tag_variable(name: str, label: str, query: str, *, multi: bool = False) -> dash.QueryVariable:
    """A variable filled by an InfluxQL ``SHOW TAG VALUES`` query."""
    var = (
        dash.QueryVariable(name)
        .label(label)
        .datasource(DATASOURCE)
        .query(query)
        .refresh(model.VariableRefresh.ON_TIME_RANGE_CHANGED)
        .sort(model.VariableSort.ALPHABETICAL_ASC)
    )
    if multi:
        var = var.multi(True).include_all(True)
    return var


def events_annotation() -> dash.AnnotationQuery:
    """Ordinance events of ``$site`` from the ``events`` measurement."""
    return (
        dash.AnnotationQuery()
        .name("Ordinance events")
        .datasource(DATASOURCE)
        .enable(True)
        .icon_color("orange")
        .target(InfluxAnnotation(EVENTS_ANNOTATION))
    )


def pushed_annotations() -> dash.AnnotationQuery:
    """Annotations the alert engine pushed through the Grafana API (tag ``stormwatch``)."""
    return (
        dash.AnnotationQuery()
        .name("Alert engine (pushed)")
        .datasource(model.DataSourceRef(type_val="grafana", uid="-- Grafana --"))
        .enable(True)
        .icon_color("red")
        .target(dash.AnnotationTarget().type("tags").tags(["stormwatch"]).match_any(True).limit(500))
    )
