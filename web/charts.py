"""Server-side SVG charts: no JavaScript, no internet, printable.

One function, :func:`chart`, draws a time axis in the site's zone, a left value axis (and an
optional right one), lines, step bars, shaded bands, horizontal reference lines and hatched
*no data* stretches (gaps are shown as unknown, never as zero), and an order's own stretch shaded.
Every text is escaped.
:func:`rain_chart`, :func:`turbidity_chart` (one per discharge point) and :func:`basin_chart` (one
per basin) build the charts of the site and work-order pages from
:class:`stormwatch.web.overview.SiteSeries`.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from fractions import Fraction
from zoneinfo import ZoneInfo

from markupsafe import Markup

from stormwatch.web.overview import BasinSeries, Gap, PointSeries, SiteModel, SiteSeries

W, H = 880, 230
LEFT, RIGHT, TOP, BOTTOM = 58, 62, 26, 34
#: Widths (px) the legend is laid out with: a title character (13 px bold), a legend character
#: (11 px), the key box and the space after an item; and the height of a legend row of its own.
TITLE_CHAR, LEGEND_CHAR, LEGEND_GAP, LEGEND_ROW = 8.0, 6.4, 24.0, 16
#: The shading of an order's own stretch on its evidence chart.
WINDOW_FILL, WINDOW_STROKE = "rgba(130,80,223,0.16)", "#8250df"

Point = tuple[datetime, float]


@dataclass(frozen=True)
class Line:
    """A polyline (``bars`` draws one bar per point of width ``bar_width``)."""

    label: str
    points: Sequence[Point]
    color: str
    right_axis: bool = False
    bars: timedelta | None = None
    dash: str = ""


@dataclass(frozen=True)
class Band:
    """A shaded area from ``low`` (a constant) up to ``upper`` points."""

    label: str
    upper: Sequence[Point]
    color: str
    low: float = 0.0


@dataclass(frozen=True)
class Rule:
    """A horizontal reference line at ``value`` (left axis)."""

    label: str
    value: float
    color: str


@dataclass
class Axis:
    label: str
    lo: float = 0.0
    hi: float = 1.0
    ticks: list[float] = field(default_factory=list)


def _nice_ticks(lo: float, hi: float, n: int = 5) -> tuple[float, float, list[float]]:
    if hi <= lo:
        hi = lo + 1.0
    raw = (hi - lo) / n
    mag = 10.0 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if raw <= m * mag * (1 + 1e-9))
    top = step * -(-hi // step)
    bottom = step * (lo // step)
    ticks = []
    v = bottom
    while v <= top + step / 1e6:
        ticks.append(round(v, 10))
        v += step
    return bottom, top, ticks


def _time_ticks(start: datetime, end: datetime, tz: ZoneInfo) -> list[datetime]:
    span = end - start
    for step in (timedelta(minutes=30), timedelta(hours=1), timedelta(hours=3), timedelta(hours=6),
                 timedelta(hours=12), timedelta(days=1), timedelta(days=2), timedelta(days=7)):
        if span / step <= 8:
            break
    local = start.astimezone(tz)
    if step >= timedelta(days=1):
        first = local.replace(hour=0, minute=0, second=0, microsecond=0)
    else:
        minutes = int(step.total_seconds() // 60)
        m = (local.hour * 60 + local.minute) // minutes * minutes
        first = local.replace(hour=m // 60, minute=m % 60, second=0, microsecond=0)
    out = []
    t = first
    while t <= end:
        if t >= start:
            out.append(t)
        t = (t + step).astimezone(tz)  # wall-clock steps stay correct across DST in UTC arithmetic
    return out


def _fmt(v: float) -> str:
    return f"{v:.0f}" if abs(v) >= 10 or v == int(v) else f"{v:.2f}".rstrip("0").rstrip(".")


@dataclass(frozen=True)
class _Plot:
    """Where things go: the plot area (``x0..x1``, ``y1`` top to ``y0`` bottom), the time span and the axes."""

    x0: float
    x1: float
    y0: float
    y1: float
    start: datetime
    span: float
    left: Axis
    right: Axis

    def x(self, t: datetime) -> float:
        return self.x0 + (self.x1 - self.x0) * min(max((t - self.start).total_seconds() / self.span, 0.0), 1.0)

    def y(self, v: float, ax: Axis) -> float:
        return self.y0 - (self.y0 - self.y1) * (v - ax.lo) / (ax.hi - ax.lo)


def _legend(title: str, lines: Sequence[Line], bands: Sequence[Band],
            gaps: Sequence[Gap]) -> tuple[list[tuple[str, str]], bool]:
    """The legend's ``(label, color)`` items and whether it fits beside the title (else on a row of
    its own under it; widths over-estimated: 13 px bold title, 11 px legend text, in whatever
    sans-serif the browser has)."""
    items = [(ln.label, ln.color) for ln in lines] + [(b.label, b.color) for b in bands]
    if gaps:
        items.append(("no data", "url(#hatch)"))
    legend_w = sum(LEGEND_GAP + LEGEND_CHAR * len(label) for label, _ in items)
    return items, LEFT + TITLE_CHAR * len(title) + LEGEND_GAP + legend_w <= W - RIGHT


def _axis(label: str, values: list[float]) -> Axis:
    lo, hi, ticks = _nice_ticks(min([0.0, *values]), max([0.0, *values]) or 1.0)
    return Axis(label, lo, hi, ticks)


def _axes_svg(p: _Plot, tz: ZoneInfo, end: datetime, right: str) -> list[str]:
    """Grid lines and ticks of the value axes, their labels, and the time axis in ``tz``."""
    e = html.escape
    out = []
    for tick in p.left.ticks:
        ty = p.y(tick, p.left)
        out.append(f'<line x1="{p.x0}" x2="{p.x1}" y1="{ty:.1f}" y2="{ty:.1f}" class="grid"/>')
        out.append(f'<text x="{p.x0 - 6}" y="{ty + 4:.1f}" text-anchor="end" class="tick">{_fmt(tick)}</text>')
    mid = (p.y0 + p.y1) / 2
    if right:
        for tick in p.right.ticks:
            out.append(f'<text x="{p.x1 + 6}" y="{p.y(tick, p.right) + 4:.1f}" class="tick">{_fmt(tick)}</text>')
        out.append(f'<text x="{W - 8}" y="{mid:.0f}" transform="rotate(90 {W - 8} {mid:.0f})" '
                   f'text-anchor="middle" class="axis">{e(right)}</text>')
    out.append(f'<text x="12" y="{mid:.0f}" transform="rotate(-90 12 {mid:.0f})" '
               f'text-anchor="middle" class="axis">{e(p.left.label)}</text>')
    for t in _time_ticks(p.start, end, tz):
        label = t.strftime("%a %d %b") if t.hour == 0 and t.minute == 0 else t.strftime("%H:%M")
        out.append(f'<line x1="{p.x(t):.1f}" x2="{p.x(t):.1f}" y1="{p.y0}" y2="{p.y0 + 4}" class="axisline"/>')
        out.append(f'<text x="{p.x(t):.1f}" y="{p.y0 + 16}" text-anchor="middle" class="tick">{e(label)}</text>')
    return out


def _bands_svg(p: _Plot, bands: Sequence[Band]) -> list[str]:
    out = []
    for b in bands:
        if not b.upper:
            continue
        pts = [f"{p.x(t):.1f},{p.y(v, p.left):.1f}" for t, v in b.upper]
        low = p.y(b.low, p.left)
        base = f"{p.x(b.upper[-1][0]):.1f},{low:.1f} {p.x(b.upper[0][0]):.1f},{low:.1f}"
        out.append(f'<polygon points="{" ".join(pts)} {base}" fill="{b.color}" class="band">'
                   f'<title>{html.escape(b.label)}</title></polygon>')
    return out


def _gaps_svg(p: _Plot, gaps: Sequence[Gap], tz: ZoneInfo) -> list[str]:
    """Hatched *no data* stretches (labelled when wide enough), each titled with its device and times."""
    e = html.escape
    out = []
    for g in gaps:
        gx0, gx1 = p.x(g.start), p.x(g.end)
        if gx1 - gx0 < 0.5:
            continue
        out.append(f'<rect x="{gx0:.1f}" y="{p.y1}" width="{gx1 - gx0:.1f}" height="{p.y0 - p.y1}" '
                   f'fill="url(#hatch)" class="gap"><title>no data from {e(g.device)}: '
                   f'{e(g.start.astimezone(tz).strftime("%d %b %H:%M"))}'
                   f' – {e(g.end.astimezone(tz).strftime("%d %b %H:%M %Z"))}</title></rect>')
        if gx1 - gx0 > 40:
            out.append(f'<text x="{(gx0 + gx1) / 2:.1f}" y="{p.y1 + 12}" text-anchor="middle" class="gaplabel">'
                       'no data</text>')
    return out


def _line_svg(p: _Plot, ln: Line) -> list[str]:
    """A polyline, or one bar per point above zero (``Line.bars``)."""
    ax = p.right if ln.right_axis else p.left
    if ln.bars is not None:
        return [f'<rect x="{p.x(t):.1f}" y="{p.y(v, ax):.1f}" width="{max(p.x(t + ln.bars) - p.x(t) - 0.5, 0.8):.1f}" '
                f'height="{p.y(ax.lo, ax) - p.y(v, ax):.1f}" fill="{ln.color}"/>' for t, v in ln.points if v > 0]
    if not ln.points:
        return []
    path = " ".join(f"{p.x(t):.1f},{p.y(v, ax):.1f}" for t, v in ln.points)
    dash = f' stroke-dasharray="{ln.dash}"' if ln.dash else ""
    return [f'<polyline points="{path}" fill="none" stroke="{ln.color}" stroke-width="1.8"{dash}/>']


def _rules_svg(p: _Plot, rules: Sequence[Rule]) -> list[str]:
    out = []
    for r in rules:
        ry = p.y(r.value, p.left)
        out.append(f'<line x1="{p.x0}" x2="{p.x1}" y1="{ry:.1f}" y2="{ry:.1f}" stroke="{r.color}" '
                   'stroke-width="1.5" stroke-dasharray="6 4"/>')
        out.append(f'<text x="{p.x1 - 4}" y="{ry - 4:.1f}" text-anchor="end" class="rule" fill="{r.color}">'
                   f'{html.escape(r.label)}</text>')
    return out


def _legend_svg(items: Sequence[tuple[str, str]], x: float, y: int) -> list[str]:
    out = []
    for label, color in items:
        out.append(f'<rect x="{x:.0f}" y="{y}" width="10" height="10" fill="{color}" stroke="#999" '
                   'stroke-width="0.5" class="legend-key"/>')
        out.append(f'<text x="{x + 14:.0f}" y="{y + 9}" class="legend">{html.escape(label)}</text>')
        x += LEGEND_GAP + LEGEND_CHAR * len(label)
    return out


def _window_svg(p: _Plot, window: tuple[datetime, datetime] | None, tz: ZoneInfo) -> list[str]:
    """The stretch an order's evidence covers, shaded and labelled (at least 3 px wide: an instant)."""
    if window is None:
        return []
    wx0, wx1 = p.x(window[0]), p.x(window[1])
    if wx1 - wx0 < 3:
        wx0, wx1 = wx0 - 1.5, wx1 + 1.5
    span = (f'{window[0].astimezone(tz).strftime("%d %b %H:%M")} – '
            f'{window[1].astimezone(tz).strftime("%d %b %H:%M %Z")}')
    return [f'<rect x="{wx0:.1f}" y="{p.y1}" width="{wx1 - wx0:.1f}" height="{p.y0 - p.y1}" fill="{WINDOW_FILL}" '
            f'stroke="{WINDOW_STROKE}" stroke-width="1" class="order-window"><title>this order: '
            f'{html.escape(span)}</title></rect>',
            f'<text x="{(wx0 + wx1) / 2:.1f}" y="{p.y1 + 24}" text-anchor="middle" class="windowlabel" '
            f'fill="{WINDOW_STROKE}">this order</text>']


def chart(title: str, start: datetime, end: datetime, tz: ZoneInfo, *, lines: Sequence[Line] = (),
          bands: Sequence[Band] = (), rules: Sequence[Rule] = (), gaps: Sequence[Gap] = (),
          left: str = "", right: str = "", y_max: float | None = None, now: datetime | None = None,
          window: tuple[datetime, datetime] | None = None) -> Markup:
    """An SVG chart of ``[start, end]`` (times shown in ``tz``).

    Args:
        lines, bands, rules: what to draw (left axis unless ``Line.right_axis``).
        gaps: stretches without data, hatched and labelled "no data".
        left, right: axis labels (``right`` empty: no right axis).
        y_max: at least this top for the left axis (e.g. the 50 % line must show).
        now: a "now" marker.
        window: the stretch of an order's evidence, shaded (the eye goes to it, not to a larger spike).
    """
    items, beside = _legend(title, lines, bands, gaps)
    if window is not None:
        items.append(("this order", WINDOW_FILL))
    legend_x, legend_y = (LEFT + TITLE_CHAR * len(title) + LEGEND_GAP, 7) if beside else (LEFT, 7 + LEGEND_ROW)
    left_values = [v for ln in lines if not ln.right_axis for _, v in ln.points]
    left_values += [v for b in bands for _, v in b.upper] + [r.value for r in rules]
    left_values += [] if y_max is None else [y_max]
    p = _Plot(LEFT, W - RIGHT, H - BOTTOM, TOP + (0 if beside or not items else LEGEND_ROW), start,
              max((end - start).total_seconds(), 1.0), _axis(left, left_values),
              _axis(right, [v for ln in lines if ln.right_axis for _, v in ln.points]))
    e = html.escape
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" class="chart" role="img" '
           f'aria-label="{e(title)}">',
           f'<title>{e(title)}</title>',
           '<defs><pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" '
           'patternTransform="rotate(45)"><rect width="6" height="6" fill="#eee"/>'
           '<line x1="0" y1="0" x2="0" y2="6" stroke="#bbb" stroke-width="2"/></pattern></defs>',
           f'<text x="{p.x0}" y="16" class="chart-title">{e(title)}</text>']
    out += _axes_svg(p, tz, end, right) + _bands_svg(p, bands) + _gaps_svg(p, gaps, tz) + _window_svg(p, window, tz)
    for ln in lines:
        out += _line_svg(p, ln)
    out += _rules_svg(p, rules)
    if now is not None and start <= now <= end:
        out.append(f'<line x1="{p.x(now):.1f}" x2="{p.x(now):.1f}" y1="{p.y1}" y2="{p.y0}" class="now"/>')
    out.append(f'<rect x="{p.x0}" y="{p.y1}" width="{p.x1 - p.x0}" height="{p.y0 - p.y1}" class="frame"/>')
    out += _legend_svg(items, legend_x, legend_y)
    out.append("</svg>")
    return Markup("".join(out))


def rain_chart(site: SiteModel, s: SiteSeries, now: datetime | None = None,
                window: tuple[datetime, datetime] | None = None) -> Markup:
    """Rain per interval (bars, inches) and cumulative depth (line, right axis); gauge gaps hatched."""
    # each bin's depth is its readings' tips x their own tip sizes (SiteSeries.rain_depth_bins)
    bars = [(t, float(d)) for t, d in s.rain_depth_bins]
    total = Fraction(0)
    cumulative: list[Point] = [(s.start, 0.0)]
    for t, d in s.rain_depth_bins:
        total += d
        cumulative.append((min(t + s.bin, s.end), float(total)))
    minutes = int(s.bin.total_seconds() // 60)
    gauge = site.cfg.rain_gauge
    return chart(f"Rain per {minutes} min and cumulative depth", s.start, s.end, site.tz,
                 lines=[Line(f"per {minutes} min", bars, "#3b7dd8", bars=s.bin),
                        Line("cumulative", cumulative, "#173f73", right_axis=True)],
                 gaps=s.gaps.get(gauge, []) if gauge else [], left="in per interval", right="cumulative in",
                 now=now, window=window)


def turbidity_chart(site: SiteModel, s: SiteSeries, point: PointSeries, now: datetime | None = None,
                window: tuple[datetime, datetime] | None = None) -> Markup:
    """One discharge point's upstream (background) and downstream turbidity with the criterion's
    allowed band (none at a point R2 does not judge: no criterion, or no background probe under a
    criterion that needs one); its probes' gaps hatched. A named point's title names it (a site file's one
    ``turbidity_pair``: the title without an id)."""
    gaps = [g for d in (point.upstream_device, point.downstream_device) if d is not None for g in s.gaps.get(d, [])]
    name = f" (allowed: {site.criterion.label})" if site.criterion else ""
    at = "" if point.legacy else f" at {point.point}"
    lines = [Line("downstream", point.downstream, "#c0392b")]
    if point.upstream_device is not None:
        lines.insert(0, Line("upstream (background)", point.upstream, "#2e8b57"))
    what = "downstream vs upstream" if point.upstream_device is not None else "downstream"
    # the band where R2 judges the point: a background probe, or a criterion that needs none
    judged = site.criterion is not None and (point.upstream_device is not None or not site.criterion.needs_background)
    return chart(f"Turbidity{at}: {what}{name}", s.start, s.end, site.tz, lines=lines,
                 bands=[Band("allowed band", point.allowed, "rgba(46,139,87,0.14)")] if judged else [],
                 gaps=gaps, left=point.unit, now=now, window=window)


def basin_chart(site: SiteModel, s: SiteSeries, basin: BasinSeries, now: datetime | None = None,
                window: tuple[datetime, datetime] | None = None) -> Markup:
    """One basin's sediment as % of design storage volume lost, with the cleanout (50 %) and warning
    lines; its level sensor's gaps hatched. A site with ``basins``: the title names the basin."""
    rule = site.basin_rule
    cleanout = (rule.cleanout_fraction if rule else 0.5) * 100
    rules = [Rule(f"cleanout {cleanout:.0f} % (by volume)", cleanout, "#c0392b")]
    if rule is not None:
        rules.append(Rule(f"warning {rule.warning_fraction * 100:.0f} %", rule.warning_fraction * 100, "#d68910"))
    which = f" {basin.basin}" if basin.named else ""
    return chart(f"Basin{which}: design storage lost to sediment", s.start, s.end, site.tz,
                 lines=[Line("lost capacity", [(t, v * 100) for t, v in basin.lost], "#7d5a3c")],
                 rules=rules, gaps=s.gaps.get(basin.device, []), left="% of design volume", y_max=cleanout + 10,
                 now=now, window=window)
