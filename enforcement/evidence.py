"""The sensor evidence of a case, as a notice shows it: figures and a chart, times in the site's zone.

A case keeps the evidence of the ordinance events it was opened from (each work order's event:
what the rule judged, e.g. the turbidity windows' medians against the allowed value). The letter
shows those figures as rows, and a chart of the readings from the store around the event: for a
turbidity contrast the upstream and downstream probes of its discharge point with the windows
judged in violation shaded and the allowed value drawn; for a storm the rain gauge's cumulative
depth in tips. Times are the site's local times. Drawn with matplotlib as SVG (text kept as text,
so the PDF stays searchable). Design: docs/enforcement.md, "The letter".
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from stormwatch.alerts.rules import parse_occurrence
from stormwatch.config import LEGACY_POINT, SiteConfig
from stormwatch.display import local_time, plural, turbidity
from stormwatch.stores.base import ReadingStore

#: The chart's size in inches (the text width of a Letter page).
_W, _H = 6.8, 2.4
#: How much of the store is shown before the first judged window and after the event.
BEFORE, AFTER = timedelta(hours=3), timedelta(hours=6)


@dataclass(frozen=True)
class Figure:
    """One row of evidence: when, what, the value."""

    when: str
    what: str
    value: str


@dataclass(frozen=True)
class Evidence:
    """The evidence of one source of a case (a work order's event).

    Attributes:
        title: what it is ("turbidity review WO-9110373ca9, Ch. 133 §133-6C").
        message: the event's message as the alert engine wrote it.
        figures: the figures the rule judged.
        chart: an inline SVG, or "" (no store given, or no chart for this kind).
        caption: what the chart shows.
    """

    title: str
    message: str
    figures: list[Figure]
    chart: str = ""
    caption: str = ""


def _t(text: Any) -> datetime:
    return datetime.fromisoformat(str(text).replace("Z", "+00:00"))


def figures_of(items: Sequence[dict[str, Any]], tz: ZoneInfo) -> list[Figure]:
    """The rows of a work order's evidence items."""
    out = []
    for item in items:
        if "downstream_median_ntu" in item:
            unit = str(item.get("unit") or "NTU")
            out.append(Figure(f"{local_time(_t(item['window_start']), tz)} – {local_time(_t(item['window_end']), tz)}",
                              "5-minute medians",
                              f"downstream {turbidity(float(item['downstream_median_ntu']), unit)}, upstream "
                              f"{turbidity(float(item['upstream_median_ntu']), unit)}, allowed "
                              f"{turbidity(float(item['allowed_ntu']), unit)}"))
        elif "tips" in item:
            out.append(Figure(local_time(_t(item["time"]), tz), "rain gauge", plural(int(item["tips"]), "tip")))
        elif "sediment_depth_ft" in item:
            out.append(Figure(local_time(_t(item["time"]), tz), "sediment depth (settled)",
                              f"{float(item['sediment_depth_ft']):.2f} ft"))
        else:
            when = local_time(_t(item["time"]), tz) if "time" in item else "-"
            out.append(Figure(when, "", ", ".join(f"{k} {v}" for k, v in item.items() if k != "time")))
    return out


def _svg(fig: Any) -> str:
    buf = io.StringIO()
    fig.tight_layout(pad=0.4)
    fig.savefig(buf, format="svg", metadata={"Date": None})
    text = buf.getvalue()
    return text[text.index("<svg"):]


def _axes(tz: ZoneInfo, start: datetime, end: datetime, ylabel: str) -> tuple[Any, Any]:
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.dates as mdates
    from matplotlib import rcParams
    from matplotlib.figure import Figure as MplFigure

    rcParams["svg.fonttype"] = "none"
    rcParams["font.family"] = "DejaVu Sans"
    rcParams["font.size"] = 7.5
    fig = MplFigure(figsize=(_W, _H))
    ax = fig.add_subplot(1, 1, 1)
    locator = mdates.AutoDateLocator(tz=tz, minticks=4, maxticks=10)  # type: ignore[no-untyped-call]
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator, tz=tz))  # type: ignore[no-untyped-call]
    ax.set_xlim(start.timestamp() / 86400.0, end.timestamp() / 86400.0)
    ax.set_ylabel(ylabel)
    ax.grid(True, color="#dddddd", linewidth=0.5)
    return fig, ax


def _x(t: datetime) -> float:
    return t.timestamp() / 86400.0


def _turbidity_chart(cfg: SiteConfig, store: ReadingStore, order: dict[str, Any], now: datetime,
                     tz: ZoneInfo) -> tuple[str, str]:
    windows = [i for i in order.get("evidence", []) if "downstream_median_ntu" in i]
    key = _point_key(str(order.get("occurrence", "")))
    points = [p for p in cfg.points if key is None or p.id == key] or list(cfg.points)
    if not windows or not points:
        return "", ""
    point = points[0]
    start = min(_t(w["window_start"]) for w in windows) - BEFORE
    end = min(_t(order["event_time"]) + AFTER, now)
    fig, ax = _axes(tz, start, end, str(windows[0].get("unit") or "NTU"))
    for device, label, color in ((point.upstream, "upstream", "#1f77b4"), (point.downstream, "downstream", "#d62728")):
        if device is None:
            continue
        rows = store.query_readings(cfg.site.id, start, end, device=device, quantity="turbidity")
        ax.plot([_x(r.time) for r in rows], [r.value for r in rows], color=color, linewidth=0.9,
                label=f"{label} ({device})")
    for w in windows:
        a, b = _x(_t(w["window_start"])), _x(_t(w["window_end"]))
        ax.axvspan(a, b, color="#d62728", alpha=0.12, linewidth=0)
        ax.plot([a, b], [float(w["allowed_ntu"])] * 2, color="#333333", linestyle="--", linewidth=0.9)
    ax.plot([], [], color="#333333", linestyle="--", linewidth=0.9, label="allowed (background + criterion)")
    ax.legend(loc="upper left", fontsize=6.5, frameon=False)
    where = point.name or (point.id if point.id != LEGACY_POINT else "the site's discharge point")
    caption = (f"Turbidity at {where}: the probes' readings from the store, "
               f"{local_time(start, tz)} to {local_time(end, tz)}; shaded: the windows judged in violation.")
    return _svg(fig), caption


def _rain_chart(cfg: SiteConfig, store: ReadingStore, order: dict[str, Any], now: datetime,
                tz: ZoneInfo) -> tuple[str, str]:
    times = [_t(i["time"]) for i in order.get("evidence", []) if "tips" in i]
    if not times or cfg.rain_gauge is None:
        return "", ""
    start, end = min(times) - timedelta(hours=1), min(max(times) + timedelta(hours=2), now)
    rows = store.query_readings(cfg.site.id, start, end, device=cfg.rain_gauge, quantity="rain_tips")
    fig, ax = _axes(tz, start, end, "tips (cumulative)")
    total, xs, ys = 0.0, [], []
    for r in rows:
        total += r.value
        xs.append(_x(r.time))
        ys.append(total)
    ax.step(xs, ys, where="post", color="#1f77b4", linewidth=0.9, label=f"rain gauge {cfg.rain_gauge}")
    ax.legend(loc="upper left", fontsize=6.5, frameon=False)
    return _svg(fig), (f"Rain at the site: cumulative tips of the gauge from the store, {local_time(start, tz)} to "
                       f"{local_time(end, tz)}.")


def _point_key(occurrence: str) -> str | None:
    """The discharge point an occurrence names (``turbidity:outfall-2:2026-...Z``), or ``None``."""
    try:
        return parse_occurrence(occurrence).key
    except ValueError:
        return None


def evidence_of(sources: Sequence[dict[str, Any]], tz: ZoneInfo, *, cfg: SiteConfig | None = None,
                store: ReadingStore | None = None, now: datetime | None = None) -> list[Evidence]:
    """The evidence of a case's sources; a chart for each when the site file and store are given."""
    out = []
    for order in sources:
        title = (f"{str(order.get('kind', 'event')).replace('_', ' ')} {order.get('order', '')}, "
                 f"{order.get('citation', '')}").strip(", ")
        chart = caption = ""
        if cfg is not None and store is not None:
            at = now or datetime.now(tz)
            if any("downstream_median_ntu" in i for i in order.get("evidence", [])):
                chart, caption = _turbidity_chart(cfg, store, order, at, tz)
            elif any("tips" in i for i in order.get("evidence", [])):
                chart, caption = _rain_chart(cfg, store, order, at, tz)
        out.append(Evidence(title, str(order.get("message", "")), figures_of(order.get("evidence", []), tz),
                            chart, caption))
    return out
