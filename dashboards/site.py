"""The site overview dashboard: one construction site as its inspector sees it.

The design: docs/dashboards.md ("The modules", `dashboards/site.py`).
"""

from __future__ import annotations

from grafana_foundation_sdk.builders import barchart, table, timeseries
from grafana_foundation_sdk.builders import common as cb
from grafana_foundation_sdk.builders import dashboard as dash
from grafana_foundation_sdk.models import common
from grafana_foundation_sdk.models import dashboard as model

from stormwatch.dashboards.common import (
    CLEAN,
    DEFAULT_PACK,
    custom_variable,
    events_annotation,
    pack_thresholds,
    pushed_annotations,
    tag_variable,
    thresholds,
    tz_variable,
)
from stormwatch.dashboards.influxql import DATASOURCE, InfluxQL
from stormwatch.physics import FLAG_BEYOND_ENVELOPE

#: The panel builders a site dashboard row holds (each a ``Builder[dashboard.Panel]`` with ``datasource``).
PanelBuilder = timeseries.Panel | barchart.Panel | table.Panel

UID = "stormwatch-site"

#: WAC 173-201A-200 (via alerts/rules/criteria.py ``Washington``): ≤ 5 NTU over background when
#: background ≤ 50 NTU, ≤ 10 % increase above that.
OVER_BACKGROUND_NTU = 5.0
INCREASE_FACTOR = 1.1

#: InfluxQL condition leaving out rain readings physics rules out (stored flagged, never rain: R1 counts
#: 0 tips for them and makes their interval a data gap; docs/ingest.md).
RAIN_NOT_IMPOSSIBLE = f'"flags" !~ /{FLAG_BEYOND_ENVELOPE}/'

_RAIN = f""""site" = '$site' AND "quantity" = 'rain_tips' AND {RAIN_NOT_IMPOSSIBLE} AND $timeFilter"""

RAIN_INTENSITY = (
    'SELECT SUM("depth_in") * 3600000 / $__interval_ms AS "intensity_in_h" FROM "readings" '
    f"WHERE {_RAIN} GROUP BY time($__interval) fill(none)"
)
CUMULATIVE_DEPTH = (
    'SELECT CUMULATIVE_SUM(SUM("depth_in")) AS "depth_in" FROM "readings" '
    f"WHERE {_RAIN} GROUP BY time($__interval) fill(none)"
)
DAILY_DEPTH = (
    'SELECT SUM("depth_in") AS "depth_in" FROM "readings" '
    f"WHERE {_RAIN} GROUP BY time(1d) fill(none) tz('$tz')"
)


def _turbidity(device_var: str, expr: str, name: str) -> str:
    return (
        f'SELECT {expr} AS "{name}" FROM "readings" WHERE "site" = \'$site\' AND "device" = \'${device_var}\' '
        f"AND \"quantity\" = 'turbidity' AND {CLEAN} AND $timeFilter GROUP BY time($__interval) fill(none)"
    )


TURBIDITY_UPSTREAM = _turbidity("upstream", 'MEDIAN("value")', "upstream NTU")
TURBIDITY_DOWNSTREAM = _turbidity("downstream", 'MEDIAN("value")', "downstream NTU")
TURBIDITY_ALLOWED_ABS = _turbidity("upstream", f'MEDIAN("value") + {OVER_BACKGROUND_NTU!r}', "allowed +5 NTU")
TURBIDITY_ALLOWED_PCT = _turbidity("upstream", f'MEDIAN("value") * {INCREASE_FACTOR!r}', "allowed +10 %")

SEDIMENT_DEPTH = (
    'SELECT $mount_ft - MEAN("value") / 304.8 AS "sediment_ft" FROM "readings" '
    f"WHERE \"site\" = '$site' AND \"quantity\" = 'distance' AND {CLEAN} AND $timeFilter "
    "GROUP BY time($__interval) fill(none)"
)
LOST_CAPACITY = (
    'SELECT "lost_capacity" * 100 AS "lost_capacity_pct" FROM "events" '
    "WHERE \"site\" = '$site' AND \"rule\" = 'R3' AND $timeFilter"
)
DEVICES = (
    'SELECT LAST("value") AS "last_value", "flags", "gateway" FROM "readings" '
    "WHERE \"site\" = '$site' AND $timeFilter GROUP BY \"device\", \"quantity\", \"unit\""
)
WORK_ORDERS = (
    'SELECT "work_order", "kind", "rule", "due_at", "citation", "message" FROM "events" '
    "WHERE \"site\" = '$site' AND \"work_order\" =~ /./ AND $timeFilter"
)


def _rain_panels(storm_in: float) -> list[PanelBuilder]:
    intensity = (
        timeseries.Panel().title("Rain intensity (in/h)")
        .description("Rain depth per interval (each reading's tips × its own tip size), scaled to an hour; "
                     "counts physics rules out are left out. A missing poll is a gap, not zero.")
        .with_target(InfluxQL(RAIN_INTENSITY)).unit("in/h").draw_style(common.GraphDrawStyle.BARS)
        .fill_opacity(60).height(8).span(12)
    )
    cumulative = (
        timeseries.Panel().title("Cumulative rainfall (in)")
        .description(f"Depth over the time range; the line is the {storm_in} in storm threshold (R1).")
        .with_target(InfluxQL(CUMULATIVE_DEPTH)).unit("in").decimals(2)
        .thresholds(thresholds(storm_in))
        .thresholds_style(cb.GraphThresholdsStyleConfig().mode(common.GraphThresholdsStyleMode.DASHED))
        .height(8).span(12)
    )
    daily = (
        barchart.Panel().title("Daily rainfall (in, local days)")
        .description("Totals per calendar day in the site's own time zone ($tz, from its site file).")
        .with_target(InfluxQL(DAILY_DEPTH)).unit("in").decimals(2).height(8).span(8)
    )
    return [intensity, cumulative, daily]


def _turbidity_panel() -> PanelBuilder:
    allowed = "allowed NTU (WAC 173-201A-200)"
    return (
        timeseries.Panel().title("Turbidity: upstream vs downstream (NTU)")
        .description("Window medians of readings without QC flags (the rules ignore flagged ones: a "
                     "-9999 error code or an out-of-range value never moves the line). Allowed = "
                     "max(background + 5 NTU, background × 1.1), the Washington criterion of R2 "
                     "(exact: the first term wins up to 50 NTU).")
        .with_target(InfluxQL(TURBIDITY_UPSTREAM).ref_id("A"))
        .with_target(InfluxQL(TURBIDITY_DOWNSTREAM).ref_id("B"))
        .with_target(InfluxQL(TURBIDITY_ALLOWED_ABS).ref_id("C"))
        .with_target(InfluxQL(TURBIDITY_ALLOWED_PCT).ref_id("D"))
        .with_transformation(model.DataTransformerConfig(id_val="joinByField", options={"mode": "outer"}))
        .with_transformation(model.DataTransformerConfig(id_val="calculateField", options={
            "mode": "reduceRow",
            "reduce": {"include": ["allowed +5 NTU", "allowed +10 %"], "reducer": "max"},
            "alias": allowed,
            "replaceFields": False,
        }))
        .with_transformation(model.DataTransformerConfig(id_val="organize", options={
            "excludeByName": {"allowed +5 NTU": True, "allowed +10 %": True},
        }))
        .override_by_name(allowed, [
            model.DynamicConfigValue(id_val="custom.lineStyle", value={"fill": "dash", "dash": [10, 10]}),
            model.DynamicConfigValue(id_val="color", value={"mode": "fixed", "fixedColor": "red"}),
        ])
        .unit("NTU").height(8).span(16)
    )


def _basin_panels(cleanout: float) -> list[PanelBuilder]:
    depth = (
        timeseries.Panel().title("Sediment depth (ft)")
        .description("Mount height of the distance-down sensor ($mount_ft ft) minus the measured distance "
                     "(readings without QC flags).")
        .with_target(InfluxQL(SEDIMENT_DEPTH)).unit("lengthft").decimals(2).height(8).span(12)
    )
    lost = (
        timeseries.Panel().title("Basin lost capacity (%)")
        .description(f"From the alert engine's basin events (R3); the line is the {cleanout:.0%} cleanout trigger.")
        .with_target(InfluxQL(LOST_CAPACITY)).unit("percent").min(0).max(100)
        .draw_style(common.GraphDrawStyle.POINTS).point_size(8)
        .thresholds(thresholds(cleanout * 100))
        .thresholds_style(cb.GraphThresholdsStyleConfig().mode(common.GraphThresholdsStyleMode.DASHED))
        .height(8).span(12)
    )
    return [depth, lost]


def _tables() -> list[PanelBuilder]:
    devices = (
        table.Panel().title("Devices: last value and last seen")
        .description("Time = last reading; flags are the gateway's QC flags (empty = clean).")
        .with_target(InfluxQL(DEVICES).table()).height(8).span(12)
    )
    orders = (
        table.Panel().title("Work orders and due dates")
        .description("Events that opened or refer to a work order; completion: `stormwatch workorders list`.")
        .with_target(InfluxQL(WORK_ORDERS).table()).height(8).span(12)
    )
    return [devices, orders]


def build(pack: str = DEFAULT_PACK, mount_ft: float = 8.0) -> dash.Dashboard:
    """The site overview dashboard (uid ``stormwatch-site``).

    Args:
        pack: rule pack whose storm threshold and cleanout fraction are drawn.
        mount_ft: default sensor mount height above the basin floor (ft), ``$mount_ft``.

    Raises:
        stormwatch.alerts.packs.PackError: unknown pack.
    """
    storm_in, cleanout = pack_thresholds(pack)
    board = (
        dash.Dashboard("Stormwatch: site overview").uid(UID).tags(["stormwatch"])
        .time("now-2d", "now").refresh("1m").timezone("browser").editable()
        .with_variable(tag_variable("site", "site", 'SHOW TAG VALUES FROM "readings" WITH KEY = "site"'))
        .with_variable(tag_variable("upstream", "upstream probe", 'SHOW TAG VALUES FROM "readings" WITH KEY = '
                                    "\"device\" WHERE \"site\" = '$site' AND \"quantity\" = 'turbidity'"))
        .with_variable(tag_variable("downstream", "downstream probe", 'SHOW TAG VALUES FROM "readings" WITH KEY = '
                                    "\"device\" WHERE \"site\" = '$site' AND \"quantity\" = 'turbidity'"))
        .with_variable(tz_variable())
        .with_variable(custom_variable("mount_ft", "sensor mount height (ft)", [(repr(mount_ft), repr(mount_ft))]))
        .annotation(events_annotation())
        .annotation(pushed_annotations())
    )
    sections: list[tuple[str, list[PanelBuilder]]] = [
        ("Rainfall", _rain_panels(storm_in)),
        ("Turbidity and basin", [_turbidity_panel(), *_basin_panels(cleanout)]),
        ("Devices and work orders", _tables()),
    ]
    for title, panels in sections:
        board = board.with_row(dash.Row(title))
        for panel in panels:
            board = board.with_panel(panel.datasource(DATASOURCE))
    return board
