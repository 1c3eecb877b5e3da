"""The report's charts, drawn with matplotlib as SVG (text kept as text, so the PDF stays searchable).

* rain: tips per hour (a period up to 7 days) or per local day, in inches, with the gauge's
  UNKNOWN stretches hatched (never drawn as zero);
* turbidity: the downstream and upstream window medians R2 judged, the allowed band under the
  criterion's allowed value, and the windows R2 could not judge hatched;
* basin: the share of the design storage volume sediment takes (R3's settled depth), with the
  pack's warning and cleanout fractions, and the stretches without level readings hatched.

Long series are reduced to at most :data:`MAX_POINTS` buckets per line (each keeps the window with
the highest downstream value, so a violation is never averaged away).
"""

from __future__ import annotations

import io
import re
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from stormwatch.report.model import Chart, Interval, Report
from stormwatch.report.trace import Collector, Window

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


#: Buckets per line of a long series: about one per point (1/72 in) of the plot's 6.7 in -- finer than
#: print shows (1,500 before: three steps per point, 300 KB of SVG path for the PDF renderer to draw).
MAX_POINTS = 500
_W, _H = 7.2, 2.3  # inches: the text width of a Letter page


def _figure() -> tuple[Figure, Axes]:
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib import rcParams
    from matplotlib.figure import Figure

    rcParams["svg.fonttype"] = "none"
    rcParams["font.family"] = "DejaVu Sans"
    rcParams["font.size"] = 7.5
    fig = Figure(figsize=(_W, _H))
    ax = fig.add_subplot(1, 1, 1)
    return fig, ax


def _x(t: datetime) -> float:
    """matplotlib's date number of ``t`` (days since 1970-01-01 UTC)."""
    return t.timestamp() / 86400.0


_ID = re.compile(r'(id="|href="#|url\(#)([^"#)]+)')


def _svg(fig: Figure, name: str) -> str:
    """The figure as inline SVG markup, its element ids prefixed with ``name`` (one HTML page
    holds every chart; matplotlib numbers ids from 1 in each)."""
    buf = io.StringIO()
    fig.tight_layout(pad=0.4)
    fig.savefig(buf, format="svg", metadata={"Date": None})
    text = buf.getvalue()
    return _ID.sub(lambda m: f"{m.group(1)}{name}-{m.group(2)}", text[text.index("<svg"):])


def _time_axis(ax: Axes, report: Report) -> None:
    import matplotlib.dates as mdates

    tz = report.tz
    locator = mdates.AutoDateLocator(tz=tz, minticks=4, maxticks=10)  # type: ignore[no-untyped-call]
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator, tz=tz))  # type: ignore[no-untyped-call]
    ax.set_xlim(_x(report.start), _x(report.end))
    ax.grid(True, color="#dddddd", linewidth=0.5)


def _hatch(ax: Axes, spans: Sequence[Interval], label: str) -> None:
    first = True
    for s in spans:
        ax.axvspan(_x(s.start), _x(s.end), facecolor="none", edgecolor="#888888", hatch="////", linewidth=0,
                   label=label if first else None)
        first = False


def charts_of(report: Report, c: Collector, rain_unknown: Sequence[Interval]) -> list[Chart]:
    """The charts of ``report`` from its evaluation's :class:`~stormwatch.report.trace.Collector`."""
    out = []
    if report.resolution is not None:
        out.append(_rain(report, c, rain_unknown))
    # one chart per discharge point and per basin, in the site file's order, on a site with several
    for i, (point, label) in enumerate(report.points or ((None, ""),)):
        windows = c.windows_of(point)
        if windows:
            out.append(_turbidity(report, windows, point, label, f"turbidity{i or ''}"))
    for i, (basin, label) in enumerate(report.basins or ((None, ""),)):
        settled = [(t, lost) for t, _d, lost, b in c.basin if basin is None or b == basin]
        if settled:
            out.append(_basin(report, settled, basin, label, f"basin{i or ''}"))
    return out


def _rain(report: Report, c: Collector, unknown: Sequence[Interval]) -> Chart:
    assert report.resolution is not None
    fig, ax = _figure()
    if report.end - report.start <= timedelta(days=7):
        width, what = timedelta(hours=1), "hour"
        buckets: dict[datetime, float] = {}
        for t, _tips, depth_in in c.rain:  # each reading's tips at its own tip size
            if report.start <= t < report.end:
                h = t.replace(minute=0, second=0, microsecond=0)
                buckets[h] = buckets.get(h, 0.0) + float(depth_in)
        xs = sorted(buckets)
        ys = [buckets[x] for x in xs]
    else:
        width, what = timedelta(days=1), "local day"
        days = [d for d in report.days if d.tips]
        xs = [datetime(d.day.year, d.day.month, d.day.day, tzinfo=report.tz) for d in days]
        ys = [d.depth_in for d in days]
    ax.bar([_x(x) for x in xs], ys, width=width.total_seconds() / 86400, align="edge", color="#1f5fa8",
           label=f"rain per {what} (in)")
    _hatch(ax, unknown, "no gauge data: UNKNOWN")
    _time_axis(ax, report)
    ax.set_ylabel("in")
    ax.set_ylim(bottom=0)
    ax.legend(loc="upper right", frameon=False)
    return Chart(f"Rain per {what}", _svg(fig, "rain"),
                 f"Whole tips of {report.resolution} counted by R1; hatched: no rain-gauge data (unknown, not zero).")


def _reduce(windows: Sequence[object], n: int) -> list[object]:
    if len(windows) <= n:
        return list(windows)
    step = len(windows) / n
    out = []
    for i in range(n):
        chunk = windows[int(i * step):int((i + 1) * step)]
        if chunk:
            out.append(max(chunk, key=lambda w: (w.downstream or 0.0) - (w.allowed or 0.0)))  # type: ignore[attr-defined]
    return out


def _steps(xs: Sequence[float], ys: Sequence[float]) -> tuple[list[float], list[float]]:
    """The corners of a step line (``steps-post``) through ``(xs, ys)``: a point whose value is the one
    before it draws nothing new and is left out, the last point kept (where the line ends) -- the
    same line with fewer vertices for the PDF's SVG renderer."""
    out_x: list[float] = []
    out_y: list[float] = []
    for i, (x, y) in enumerate(zip(xs, ys, strict=True)):
        if out_y and y == out_y[-1] and i != len(xs) - 1:
            continue
        out_x.append(x)
        out_y.append(y)
    return out_x, out_y


def _turbidity(report: Report, windows: Sequence[Window], point: str | None, where: str, svg_id: str) -> Chart:
    fig, ax = _figure()
    inside = [w for w in windows if report.start <= w.start < report.end]
    shown = _reduce(inside, MAX_POINTS)
    judged = [w for w in shown if w.allowed is not None]  # type: ignore[attr-defined]
    if judged:
        band_x, band_y = _steps([_x(w.start) for w in judged], [w.allowed for w in judged])  # type: ignore[attr-defined]
        ax.fill_between(band_x, 0, band_y, step="post", color="#cfe8cf", label="allowed band (criterion)")
    for attr, color, label in (("upstream", "#4d9a4d", "upstream (background) median"),
                               ("downstream", "#b03030", "downstream median")):
        pts = [(w.start, getattr(w, attr)) for w in shown if getattr(w, attr) is not None]  # type: ignore[attr-defined]
        if pts:
            line_x, line_y = _steps([_x(p[0]) for p in pts], [p[1] for p in pts])
            ax.plot(line_x, line_y, color=color, linewidth=0.8, label=label, drawstyle="steps-post")
    _hatch(ax, [u.interval for u in report.unknown if u.what == "turbidity contrast" and u.point == point],
           "not judged: UNKNOWN")
    rows = report.turbidity_of(point)
    unit = rows[0].unit if rows else "NTU"
    _time_axis(ax, report)
    ax.set_ylabel(unit)
    ax.set_ylim(bottom=0)
    # above the plot: inside, its four entries covered the hatching of the windows not judged
    ax.legend(loc="lower left", bbox_to_anchor=(0.0, 1.01), frameon=False, ncol=4, borderaxespad=0.0)
    at = f" at {where}" if where else ""
    return Chart(f"Turbidity{at}: downstream against background", _svg(fig, svg_id),
                 "Window medians R2 judged (5-min windows); green: values the criterion allows; hatched: windows "
                 "without clean readings of a probe (unknown).")


def _basin(report: Report, settled: Sequence[tuple[datetime, float]], basin: str | None, label: str,
           svg_id: str) -> Chart:
    fig, ax = _figure()
    pts = [(t, lost * 100) for t, lost in settled if t < report.end]
    before = [p for p in pts if p[0] < report.start]
    pts = ([(report.start, before[-1][1])] if before else []) + [p for p in pts if p[0] >= report.start]
    if pts:  # held to the period's end -- or to the state's clock: after it nothing had happened yet
        pts.append((report.not_yet.start if report.not_yet is not None else report.end, pts[-1][1]))
        ax.plot([_x(p[0]) for p in pts], [p[1] for p in pts], drawstyle="steps-post", color="#7a4a1a", linewidth=1,
                label="sediment, % of design storage volume")
    # a stretch without level readings: the line holds its last settled value across it (R3 decides
    # nothing new there), hatched as unknown -- never read as a basin that stayed where it was
    gaps = [u.interval for u in report.unknown
            if u.what == "basin level" and (basin is None or u.point in (None, basin))]
    _hatch(ax, gaps, "no level data: UNKNOWN")
    if report.basin_limits is not None:
        warn, clean = report.basin_limits
        ax.axhline(warn * 100, color="#c08000", linewidth=0.8, linestyle=":", label=f"warning ({warn:.0%})")
        ax.axhline(clean * 100, color="#b03030", linewidth=0.8, linestyle="--", label=f"cleanout ({clean:.0%})")
    _time_axis(ax, report)
    ax.set_ylabel("% of design volume")
    ax.set_ylim(0, 100)
    ax.legend(loc="upper left", frameon=False)
    name = f" {label}" if label else ""
    return Chart(f"Sediment basin{name}: storage taken by sediment", _svg(fig, svg_id),
                 "R3's settled sediment depth as a share of the design storage volume (stage-storage geometry); "
                 "hatched: no level readings (unknown).")
