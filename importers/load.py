"""Import one file into the store: rows -> readings -> the live validator -> the store.

The same path as live data (ingest): every reading goes through
:class:`stormwatch.ingest.validate.Validator` (site, device, quantity, unit against the device profile, time
not in the future) and rejected ones are dead-lettered in the store; accepted ones are written
with the store's own deduplication (:mod:`stormwatch.importers.identity` makes a re-import add nothing).
Before that every reading gets the quality flags a live poll would get (:mod:`stormwatch.importers.qc`,
the gateway's checks: ``out_of_range``, ``device_error``, ``flatline``, ``spike``).

Configuration problems are found before anything is stored and raised as :class:`ImportFailed`:
an unknown device, a column the file lacks, a unit that differs from the device profile (and has
no exact conversion), a rain file whose tip size is not the gauge's.
"""

from __future__ import annotations

import itertools
import logging
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Literal

from stormwatch import topics
from stormwatch.alerts.backfill import depth_text
from stormwatch.clock import Clock
from stormwatch.config import SiteConfig
from stormwatch.contract import TIP_UNIT, Reading, dump_readings
from stormwatch.display import amount, counts, names, plural
from stormwatch.errors import InputError
from stormwatch.importers.detect import open_table
from stormwatch.importers.identity import IMPORT_GATEWAY, import_seq
from stormwatch.importers.options import ImportOptions, zone_note
from stormwatch.importers.overlap import Coverage, coverage, overlap_detail
from stormwatch.importers.qc import flag_readings
from stormwatch.importers.rows import Conversion, Progress, RowReject, build_readings, file_counter
from stormwatch.importers.table import TableError
from stormwatch.ingest.validate import LEVEL_QUANTITIES, Validator
from stormwatch.profiles import DeviceProfile, ProfileError, ProfileLibrary
from stormwatch.stores.base import ReadingStore, WriteOutcome, refusal_letters
from stormwatch.tipsizes import TipSizes
from stormwatch.wire import format_time

log = logging.getLogger(__name__)

#: Validator reasons that mean "this configuration cannot import this column" (abort, store nothing).
CONFIG_REASONS = frozenset({"topic_mismatch", "unknown_site", "unknown_gateway", "unknown_device",
                            "unknown_quantity", "unit_mismatch"})

#: Rejected rows logged one by one per reason; the rest are only counted.
LOG_REJECTS = 20
#: ``boot`` of the zero-tip readings ``import --silence dry`` stores between an event log's rows.
DRY_IMPORT_BOOT = "import-dry"


def dry_polls(readings: Sequence[Reading], every: timedelta, boot: str) -> list[Reading]:
    """Zero-tip readings every ``every`` between consecutive readings (none after the last one), of
    the tip size of the reading before them.

    They say "the event log recorded no tip here"; the replay keeps them in its temporary store,
    ``stormwatch import --silence dry`` stores them (``boot`` tells them apart from the file's rows:
    :data:`DRY_IMPORT_BOOT`, or the replay's own).
    """
    out: list[Reading] = []
    for a, b in itertools.pairwise(readings):
        when = a.time + every
        while when < b.time:
            out.append(Reading(site=a.site, device=a.device, quantity="rain_tips", value=0, unit=TIP_UNIT,
                               time=when, gateway=IMPORT_GATEWAY, boot=boot, seq=import_seq(when),
                               raw="no row in the event log", tip_size=a.tip_size))
            when += every
    return out


class ImportFailed(InputError):
    """The file cannot be imported as configured; nothing was stored. The message says why."""


@dataclass
class ImportSummary:
    """The outcome of one import.

    Attributes:
        path, site, device, format: what was imported where.
        rows_read: data rows in the file.
        readings_made: readings built from the rows (rain: one per timestamp).
        readings_stored: readings new to the store (InfluxDB counts points written).
        already_stored: readings the store or validator already had with the same value (a re-import);
            one the store holds with ANOTHER value for its time is a rejected row ``conflicting_value``
            (a second file with another value at a timestamp already imported: the stored one is kept).
        gaps: cells that held no value (empty, NaN, sentinel) -- not stored, never zero.
        duplicate_rows: rows repeating an earlier row at the same time (rtl_433: repeated messages).
        ignored_lines: lines that are not the device's data (JSON Lines: other sensors, other
            message types, statistics).
        tips: total tips made (rain files).
        resolution: the gauge's tip size as its profile writes it (rain files), for the depth.
        flagged: QC flag -> count of readings carrying it (stored, flagged, never dropped).
        rejected_rows: reason -> count of skipped rows.
        dead_lettered: validator reason -> count of readings dead-lettered.
        first, last: event-time span of the readings (UTC).
        rejects: the skipped rows with ``file:line``.
        tz, tz_source, local_times: the zone the file's times without an offset were read in,
            where it came from (:data:`stormwatch.importers.options.ZoneSource`) and how many
            such times there were.
    """

    path: str
    site: str
    device: str
    format: str
    rows_read: int = 0
    readings_made: int = 0
    readings_stored: int = 0
    already_stored: int = 0
    gaps: int = 0
    duplicate_rows: int = 0
    ignored_lines: int = 0
    tips: int = 0
    resolution: str | None = None
    flagged: dict[str, int] = field(default_factory=dict)
    rejected_rows: dict[str, int] = field(default_factory=dict)
    dead_lettered: dict[str, int] = field(default_factory=dict)
    first: datetime | None = None
    last: datetime | None = None
    rejects: list[RowReject] = field(default_factory=list)
    tz: str = "UTC"
    tz_source: str = "--tz"
    local_times: int = 0

    def to_json(self) -> dict[str, Any]:
        """JSON-ready summary (times RFC 3339 UTC; rejects as ``file:line: detail`` strings)."""
        return {
            "file": self.path, "site": self.site, "device": self.device, "format": self.format,
            "rows_read": self.rows_read, "readings_made": self.readings_made,
            "readings_stored": self.readings_stored, "already_stored": self.already_stored, "gaps": self.gaps,
            "duplicate_rows": self.duplicate_rows, "ignored_lines": self.ignored_lines, "tips": self.tips,
            "flagged": dict(self.flagged),
            "rejected_rows": dict(self.rejected_rows),
            "dead_lettered": dict(self.dead_lettered),
            "first": format_time(self.first) if self.first else None,
            "last": format_time(self.last) if self.last else None,
            "rejects": [r.detail for r in self.rejects],
            "tz": self.tz, "tz_source": self.tz_source, "local_times": self.local_times,
        }

    def _depth(self) -> str:
        return depth_text(self.tips, self.resolution) if self.resolution else plural(self.tips, "tip")

    def lines(self) -> list[str]:
        """The summary for a person."""
        span = f"{format_time(self.first)} .. {format_time(self.last)}" if self.first and self.last else "no readings"
        out = [
            f"imported {self.path} ({self.format}) as {self.site}/{self.device}: {span}",
            f"  rows read:        {self.rows_read}",
            f"  readings made:    {self.readings_made}" + (f" ({self._depth()})" if self.resolution else ""),
            f"  readings stored:  {self.readings_stored} new, {self.already_stored} already stored",
            f"  gaps (no value):  {self.gaps}",
            f"  times:            {zone_note(self.tz, self.tz_source, self.local_times)}",
        ]
        if self.flagged:
            out.append(f"  QC flagged:       {counts(self.flagged)}")
        if self.duplicate_rows:
            out.append(f"  duplicate rows:   {self.duplicate_rows}")
        if self.ignored_lines:
            out.append(f"  other lines:      {self.ignored_lines} (other sensors, message types, statistics)")
        rejected = sum(self.rejected_rows.values())
        detail = f" ({counts(self.rejected_rows)})" if rejected else ""
        out.append(f"  rows rejected:    {rejected}{detail}")
        if self.rejects:
            more = " (-v or --json for all)" if rejected > 1 else ""
            out.append(f"  first rejected:   {self.rejects[0].detail}{more}")
        if self.dead_lettered:
            out.append(f"  dead-lettered:    {sum(self.dead_lettered.values())} ({counts(self.dead_lettered)})")
        return out


def profile_units(profile: DeviceProfile) -> dict[str, str]:
    """quantity -> unit the device's readings must carry (level devices also make ``stage`` and
    ``sediment_depth`` in metres, as :class:`stormwatch.ingest.validate.Validator` accepts)."""
    units = dict(profile.quantities())
    if profile.level is not None:
        units.update(LEVEL_QUANTITIES)
    return units


def _check_tips(profile: DeviceProfile, options: ImportOptions, device: str, sizes: TipSizes | None) -> None:
    tips = options.tips
    if tips is None:
        return
    if profile.counter is None or sizes is None:
        raise ImportFailed(f"device {device!r} (profile {profile.model}) is not a rain gauge: its profile has no "
                           "counter section with the tip size")
    known = {sizes.current, *(size for _, size in sizes.earlier)}
    if tips.resolution not in known:
        earlier = (f", and earlier gauges of {', '.join(str(z) for _, z in sizes.earlier)} (replaced_gauges)"
                   if sizes.earlier else "")
        raise ImportFailed(
            f"device {device!r} counts tips of {profile.counter.resolution} (profile {profile.model}){earlier} but "
            f"the file's tips are {tips.size} {tips.unit}: import them as a gauge whose profile has that tip size, "
            f"or record the gauge that counted them under the device's replaced_gauges"
        )


def _check_periods(readings: list[Reading], sizes: TipSizes, path: Path) -> None:
    """Every rain reading of the file falls in a period whose gauge has the file's tip size.

    Raises:
        ImportFailed: the first that does not (the file spans a gauge replacement: split it).
    """
    for r in readings:
        if r.quantity == "rain_tips" and r.tip_size is not None and r.tip_size != sizes.text_at(r.time):
            raise ImportFailed(
                f"{path}: the row at {format_time(r.time)} has tips of {r.tip_size}, but the site file gives "
                f"{sizes.device} tips of {sizes.text_at(r.time)} then ({sizes.source_at(r.time)}): a file spanning a "
                "gauge replacement is imported in two parts, each with its own --tip-in/--tip-mm")


#: ``progress(fraction)``, 0 to 1, of a whole import (:func:`stormwatch.runtime.cliutil.progress`'s callback).
Fraction = Callable[[float], None]
#: The share of an import's work that is reading the rows; the rest is validating and writing.
READ_SHARE = 0.1


def import_file(path: Path, cfg: SiteConfig, device_id: str, profiles: ProfileLibrary, store: ReadingStore,
                options: ImportOptions, clock: Clock, progress: Fraction | None = None,
                batch_size: int = 1000, silence: Literal["gap", "dry"] = "gap") -> ImportSummary:
    """Import ``path`` as readings of ``device_id`` at ``cfg``'s site into ``store``.

    Args:
        path: the file.
        cfg: the site.
        device_id: the device the file belongs to.
        profiles: the profile library of the site.
        store: where readings, and dead letters, are written.
        options: format options; times without an offset are read in the site's zone unless
            ``options.tz`` names one (``--tz``).
        clock: time base of the validator (future-time check, dead-letter receive time).
        progress: ``progress(fraction)`` through the whole import: reading the rows is the first
            :data:`READ_SHARE`, validating and writing the readings (batch by batch) the rest -- a
            year-long event log with ``silence="dry"`` is ~500,000 readings and most of the time.
        batch_size: readings per validated and written batch.
        silence: ``gap`` (default): only the file's rows are stored, so a stretch without rows is a
            data gap to the rules; ``dry``: the file is a rain event log (a row per tip or per
            non-zero interval): zero-tip readings every poll interval of the device are stored
            between its rows (boot :data:`DRY_IMPORT_BOOT`), so the rules and reports see a gauge
            that reported dry weather there (docs/importing.md).

    Returns:
        The summary.

    Raises:
        ImportFailed: the configuration cannot import this file (nothing stored).
        stormwatch.stores.base.StoreError: the store refused a write (earlier batches are stored; a
            re-run completes the import without duplicates).
    """
    site = cfg.site.id
    options = options.in_zone(cfg.site.timezone, "site")
    try:
        device = cfg.device(device_id)
    except KeyError:
        raise ImportFailed(f"no device {device_id!r} in site {site!r} "
                           f"(devices: {names(d.id for d in cfg.devices)})") from None
    try:
        profile = profiles.get(device.profile)
    except ProfileError as exc:
        raise ImportFailed(str(exc)) from exc
    sizes = TipSizes.of(cfg, profiles, device_id) if profile.counter is not None else None
    _check_tips(profile, options, device_id, sizes)
    try:
        table = open_table(path, options)
        counter = None
        if options.tips is not None and profile.counter is not None:
            counter = file_counter(options.tips, profile.counter.max_intensity_mm_h)
        rows: Progress | None = None
        if progress is not None:
            report = progress

            def rows(done: int, total: int) -> None:
                report(READ_SHARE * done / max(total, 1))
        conv = build_readings(table, options, site, device_id, profile_units(profile), rows, counter)
    except TableError as exc:
        raise ImportFailed(str(exc)) from exc
    if sizes is not None and sizes.replaced:
        _check_periods(conv.readings, sizes, path)
    conv.readings = flag_readings(conv.readings, profile)
    covers = _coverages(store, site, device_id, conv.readings, device.poll_interval_s, clock)
    conv.readings = _drop_overlaps(conv.readings, covers, conv, str(path))
    if silence == "dry":
        if options.tips is None:
            raise ImportFailed("--silence dry is for rain event logs (give the tip size: --tip-mm or --tip-in)")
        rain = sorted((r for r in conv.readings if r.quantity == "rain_tips"), key=lambda r: r.time)
        dry = dry_polls(rain, timedelta(seconds=device.poll_interval_s), boot=DRY_IMPORT_BOOT)
        cover = covers.get("rain_tips")
        if cover is not None:  # no dry poll where another source reported: it has the say there
            dry = [r for r in dry if cover.covering(r.time) is None]
        log.info("import %s: %d dry polls stored between the event log's rows (every %g s)", path, len(dry),
                 device.poll_interval_s)
        conv.readings = sorted([*conv.readings, *dry], key=lambda r: r.time)
    summary = ImportSummary(str(path), site, device_id, table.format, rows_read=conv.rows_read,
                            readings_made=len(conv.readings), gaps=conv.gaps, duplicate_rows=conv.duplicate_rows,
                            ignored_lines=table.ignored_lines,
                            tips=conv.tips, rejects=conv.rejects,
                            resolution=profile.counter.resolution if options.tips and profile.counter else None,
                            flagged=dict(Counter(f for r in conv.readings for f in r.flags)),
                            tz=table.time.zone_name, tz_source=table.time.source,
                            local_times=table.time.local_times)
    reasons = Counter(r.reason for r in conv.rejects)
    summary.rejected_rows = dict(reasons)
    logged: Counter[str] = Counter()
    for r in conv.rejects:
        logged[r.reason] += 1
        if logged[r.reason] <= LOG_REJECTS:  # INFO (-v): the summary counts them and names the first
            log.info("row skipped (%s): %s", r.reason, r.detail)
    for reason, n in reasons.items():
        if n > LOG_REJECTS:
            log.info("... and %d more rows skipped for %s", n - LOG_REJECTS, reason)
    if conv.readings:
        summary.first = min(r.time for r in conv.readings)
        summary.last = max(r.time for r in conv.readings)

    # Historical files are old by nature: no age bound (implausible_time is for live gateways' clocks).
    validator = Validator.for_sites([cfg.model_copy(update={"gateway_id": IMPORT_GATEWAY})], profiles, clock,
                                    max_age_s=None)
    topic = topics.readings(site, IMPORT_GATEWAY)
    _preflight(validator, topic, conv.readings)
    dead: Counter[str] = Counter()
    for start in range(0, len(conv.readings), batch_size):
        _write_batch(validator, store, topic, conv.readings[start:start + batch_size], summary, dead, conv.lines)
        if progress is not None:
            progress(READ_SHARE + (1 - READ_SHARE) * min(start + batch_size, len(conv.readings)) / len(conv.readings))
    if progress is not None:
        progress(1.0)
    summary.dead_lettered = dict(dead)
    log.info("import %s: %s, %s, %d new, %d already stored, %s, %s rejected",
             path, plural(summary.rows_read, "row"), plural(summary.readings_made, "reading"), summary.readings_stored,
             summary.already_stored, plural(summary.gaps, "gap"), plural(sum(summary.rejected_rows.values()), "row"))
    return summary


def _coverages(store: ReadingStore, site: str, device: str, readings: Sequence[Reading], poll_interval_s: float,
               clock: Clock) -> dict[str, Coverage]:
    """quantity -> what other sources' stored readings of ``device`` cover over the file's span."""
    spans: dict[str, tuple[datetime, datetime]] = {}
    for r in readings:
        lo, hi = spans.get(r.quantity, (r.time, r.time))
        spans[r.quantity] = (min(lo, r.time), max(hi, r.time))
    return {q: coverage(store, site, device, q, lo, hi, poll_interval_s, clock) for q, (lo, hi) in spans.items()}


def _drop_overlaps(readings: list[Reading], covers: Mapping[str, Coverage], conv: Conversion,
                   path: str) -> list[Reading]:
    """``readings`` without those another source's stored readings cover: their rows are rejected
    ``overlaps_stored`` (:mod:`stormwatch.importers.overlap`)."""
    kept: list[Reading] = []
    for r in readings:
        cover = covers.get(r.quantity)
        span = cover.covering(r.time) if cover is not None else None
        if span is None or cover is None:
            kept.append(r)
            continue
        line = conv.lines.get((r.boot, r.seq), 0)
        conv.rejects.append(RowReject(line, "overlaps_stored", f"{path}:{line}: {overlap_detail(r, span, cover)}"))
        if r.quantity == "rain_tips":
            conv.tips -= int(r.value)
    return kept


def _preflight(validator: Validator, topic: str, readings: Sequence[Reading]) -> None:
    """Validate the first reading of each quantity; a configuration mismatch aborts the import."""
    firsts: dict[str, Reading] = {}
    for r in readings:
        firsts.setdefault(r.quantity, r)
    for r in firsts.values():
        for letter in validator.validate(topic, dump_readings([r])).dead:
            if letter.reason in CONFIG_REASONS:
                raise ImportFailed(f"{letter.reason}: {letter.detail} (nothing imported)")


def _write_batch(validator: Validator, store: ReadingStore, topic: str, batch: Sequence[Reading],
                 summary: ImportSummary, dead: Counter[str], lines: Mapping[tuple[str, int], int]) -> None:
    result = validator.validate(topic, dump_readings(list(batch)))
    if result.dead:
        store.write_deadletters(result.dead)
        for letter in result.dead:
            dead[letter.reason] += 1
            if dead[letter.reason] <= LOG_REJECTS:
                log.warning("reading dead-lettered (%s): %s", letter.reason, letter.detail)
    for readings, late in ((result.accepted, False), (result.late, True)):
        if readings:
            outcome = store.write_checked(readings, late=late)
            validator.committed(outcome.held(readings))
            summary.readings_stored += outcome.new
            summary.already_stored += outcome.already
            for c in outcome.conflicts:  # a row whose time is already stored with another value: its row, refused
                line = lines.get((c.reading.boot, c.reading.seq), 0)
                summary.rejects.append(RowReject(line, "conflicting_value", (
                    f"{summary.path}:{line}: {c.reading.quantity} {amount(c.reading.value, c.reading.unit)} at "
                    f"{format_time(c.reading.time)}: the store already holds "
                    f"{amount(c.stored_value, c.stored_unit)} for "
                    "this time (imported before from another file?); the stored value is kept")))
                summary.rejected_rows["conflicting_value"] = summary.rejected_rows.get("conflicting_value", 0) + 1
            letters = refusal_letters(WriteOutcome(refused=outcome.refused), validator.clock.now(), lambda _r: topic)
            if letters:  # the server refused them: dead letters, like the validator's
                store.write_deadletters(letters)
                for letter in letters:
                    dead[letter.reason] += 1
                    log.warning("reading dead-lettered (%s): %s", letter.reason, letter.detail)
    summary.already_stored += len(result.duplicates)
