"""The portfolio dashboard for the Stormwater Management Officer: every site at a glance.

Panels (InfluxQL, grouped by the ``site`` tag):

* Sites: readings received and last-seen time per site.
* Work orders opened and overdue per site (distinct work-order ids of the ``events`` measurement;
  ``inspection_overdue`` is announced by the alert service when a due date passes).
* Last qualifying storm per site (``storm_qualified``: depth, start and end).
* Data gaps: ``data_gap`` events per site, and readings per device per 15 minutes, where a zero
  is a gap (a *count* of zero is a true zero; the readings themselves are never filled).
"""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as dash
from grafana_foundation_sdk.builders import statushistory, table

from stormwatch.dashboards.common import events_annotation, pushed_annotations, tag_variable, thresholds
from stormwatch.dashboards.influxql import DATASOURCE, InfluxQL

UID = "stormwatch-portfolio"

SITES_READINGS = 'SELECT COUNT("value") AS "readings" FROM "readings" WHERE $timeFilter GROUP BY "site"'
SITES_LAST_SEEN = 'SELECT LAST("value") AS "last_value", "device" FROM "readings" WHERE $timeFilter GROUP BY "site"'
ORDERS_OPENED = (
    'SELECT COUNT(DISTINCT("work_order")) AS "opened" FROM "events" '
    "WHERE \"work_order\" =~ /./ AND \"kind\" != 'inspection_overdue' AND $timeFilter GROUP BY \"site\""
)
ORDERS_OVERDUE = (
    'SELECT COUNT(DISTINCT("work_order")) AS "overdue" FROM "events" '
    "WHERE \"kind\" = 'inspection_overdue' AND $timeFilter GROUP BY \"site\""
)
OVERDUE_LIST = (
    'SELECT "work_order", "due_at", "citation", "message" FROM "events" '
    "WHERE \"kind\" = 'inspection_overdue' AND $timeFilter GROUP BY \"site\""
)
LAST_STORM = (
    'SELECT LAST("depth_in") AS "depth_in", "tips", "storm_start", "storm_end", "citation" FROM "events" '
    "WHERE \"kind\" = 'storm_qualified' AND $timeFilter GROUP BY \"site\""
)
GAP_EVENTS = (
    'SELECT "gap_start", "gap_end", "message" FROM "events" '
    "WHERE \"kind\" = 'data_gap' AND $timeFilter GROUP BY \"site\""
)
READINGS_PER_15MIN = (
    'SELECT COUNT("value") AS "readings" FROM "readings" WHERE "site" =~ /^$site$/ AND $timeFilter '
    'GROUP BY time(15m), "site", "device" fill(0)'
)


def _table(title: str, description: str, *queries: str) -> table.Panel:
    panel = table.Panel().title(title).description(description).datasource(DATASOURCE).height(8).span(12)
    for i, q in enumerate(queries):
        panel = panel.with_target(InfluxQL(q).table().ref_id("ABCDEFGH"[i]))
    return panel


def build() -> dash.Dashboard:
    """The portfolio dashboard (uid ``stormwatch-portfolio``)."""
    gaps = (
        statushistory.Panel().title("Readings per device per 15 min (0 = data gap)")
        .description("A count per 15-minute slot; 0 means the device sent nothing then.")
        .datasource(DATASOURCE).with_target(InfluxQL(READINGS_PER_15MIN).alias("$tag_site / $tag_device"))
        .thresholds(thresholds(1, below="red", above="green")).height(10).span(24)
    )
    return (
        dash.Dashboard("Stormwatch: portfolio").uid(UID).tags(["stormwatch"])
        .time("now-7d", "now").refresh("5m").timezone("browser").editable()
        .with_variable(tag_variable("site", "sites", 'SHOW TAG VALUES FROM "readings" WITH KEY = "site"', multi=True))
        .annotation(events_annotation())
        .annotation(pushed_annotations())
        .with_panel(_table("Sites: readings and last seen", "Readings received in the range; last reading per site.",
                           SITES_READINGS, SITES_LAST_SEEN))
        .with_panel(_table("Work orders: opened and overdue", "Distinct work orders per site in the range.",
                           ORDERS_OPENED, ORDERS_OVERDUE))
        .with_panel(_table("Overdue inspections", "inspection_overdue events with the missed due date.",
                           OVERDUE_LIST))
        .with_panel(_table("Last qualifying storm", "The latest storm_qualified event per site (R1).", LAST_STORM))
        .with_panel(_table("Data gaps (events)", "data_gap events of the alert engine.", GAP_EVENTS))
        .with_panel(gaps)
    )
