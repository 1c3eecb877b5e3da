"""Pieces shared by the stormwatch dashboards: variables, thresholds, the events annotation.

Constants and their sources:

* 0.5 in storm threshold -- R1 of the rule packs (``alerts/packs/*.yaml``, ``threshold_in``);
  read from the pack at build time, not copied.
* 50 % lost capacity -- R3 ``cleanout_fraction`` of the pack, likewise.
* Tip sizes -- the ``counter.resolution`` of every gauge profile in ``device_profiles/``
  (0.01 in, 0.2 mm = 0.2 / 25.4 in), converted by :class:`stormwatch.rain.TipResolution`.
"""

from __future__ import annotations

from fractions import Fraction

from grafana_foundation_sdk.builders import dashboard as dash
from grafana_foundation_sdk.models import dashboard as model

from stormwatch.alerts.packs import load_pack
from stormwatch.dashboards.influxql import DATASOURCE, InfluxAnnotation
from stormwatch.profiles import ProfileLibrary

#: Rule pack whose thresholds the dashboards draw (the example site's jurisdiction).
DEFAULT_PACK = "ch133"



def tip_sizes(profiles: ProfileLibrary | None = None) -> list[tuple[str, Fraction]]:
    """``(resolution text, inches per tip)`` of every gauge profile, largest first, no duplicates."""
    library = profiles or ProfileLibrary()
    sizes: dict[str, Fraction] = {}
    for name in library.names():
        counter = library.get(name).counter
        if counter is not None:
            sizes[counter.resolution] = counter.tip_resolution.inches
    return sorted(sizes.items(), key=lambda kv: (-kv[1], kv[0]))

#: IANA zones offered for local daily totals; first = default (the example site's zone).
TIME_ZONES = ("America/New_York", "America/Chicago", "America/Denver", "America/Los_Angeles", "UTC")

#: Events query behind the annotations (docs/influxdb-schema.md, measurement ``events``).
EVENTS_ANNOTATION = """SELECT "title", "text", "kind" FROM "events" WHERE "site" = '$site' AND $timeFilter"""


def pack_thresholds(pack: str = DEFAULT_PACK) -> tuple[float, float]:
    """``(storm threshold in inches, cleanout fraction)`` of rule pack ``pack`` (R1 and R3).

    Raises:
        stormwatch.alerts.packs.PackError: unknown or invalid pack.
        ValueError: the pack lacks a storm or basin rule.
    """
    rules = load_pack(pack)
    storm, basin = rules.storm(), rules.basin()
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


def tip_variable() -> dash.CustomVariable:
    """``$tip_in``: inches per tip of the site's gauge."""
    return custom_variable("tip_in", "gauge (in per tip)", [(label, repr(float(size))) for label, size in tip_sizes()])


def tz_variable() -> dash.CustomVariable:
    """``$tz``: the site's IANA time zone, for daily totals by local day (InfluxQL ``tz()``)."""
    return custom_variable("tz", "site time zone", [(z, z) for z in TIME_ZONES])


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
