"""The write side shared by the InfluxDB stores (:mod:`stormwatch.stores.influx1`, :mod:`stormwatch.stores.influx2`).

Lines come from :mod:`stormwatch.stores.lineprotocol` and go out in batches of at most ``batch_lines``
through the store's ``_send`` (one request; raises :class:`~stormwatch.stores.splitwrite.BatchRejected` when
the server refuses the content). A refused batch is bisected (:func:`stormwatch.stores.splitwrite.write_split`)
so only the refused lines are lost; each is logged at WARNING and returned to the caller as refused
(:meth:`LineProtocolWrites.write_checked`; ingest dead-letters it as ``store_rejected`` -- stored,
published and counted like every other dead letter), or kept as a dead letter by
:meth:`LineProtocolWrites.write_readings` (failure-kinds.md #15).

The design: docs/stores.md ("The modules", `stores/influxwrite.py`).
"""

from __future__ import annotations

import json
import logging
import threading
import zlib
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from itertools import repeat
from operator import floordiv, itemgetter, sub
from typing import Any, ClassVar, Generic, TypeVar

from stormwatch.clock import Clock
from stormwatch.contract import RAIN_TIPS, Event, Reading
from stormwatch.stores.base import (
    Conflict,
    DeadLetter,
    Refused,
    SiteInfo,
    StoreError,
    WriteOutcome,
    keep_refusals,
)
from stormwatch.stores.lineprotocol import (
    DEADLETTER,
    READINGS,
    SLOTS_PER_US,
    Fields,
    deadletter_points,
    encode_points,
    event_point,
    from_ns,
    reading_line,
    reading_lines,
    site_point,
    time_ns,
)
from stormwatch.stores.splitwrite import write_split

T = TypeVar("T")

#: Points of one site (or dead-letter reason) closer than this in time are looked up in one window.
WINDOW_GAP = timedelta(minutes=10)
_WINDOW_GAP_US = int(WINDOW_GAP.total_seconds()) * 1_000_000

Identity = tuple[str, str, int]
#: How far past its receive time a dead letter's stored time is looked for (1 s in ns).
_DEADLETTER_SPREAD_NS = 999_999_999


@dataclass(frozen=True)
class Window:
    """Points to look up: ``start_ns <= time <= stop_ns`` and, for each ``(tag, values)`` of
    ``match``, the tag equal to one of the values."""

    match: tuple[tuple[str, tuple[str, ...]], ...]
    start_ns: int
    stop_ns: int


@dataclass(frozen=True)
class StoredPoint:
    """A point found by :meth:`LineProtocolWrites._stored`: its tags, time (ns) and the asked fields
    (``None`` where the point has no such field)."""

    tags: Mapping[str, str]
    time_ns: int
    fields: tuple[Any, ...]


def cover(pinned: str, spans: Mapping[str, Iterable[tuple[int, str]]], any_of: str | None = None) -> list[Window]:
    """Windows covering every microsecond of ``spans`` (one window per run of microseconds closer
    than :data:`WINDOW_GAP`).

    Args:
        pinned: the tag every window fixes (``site``, ``reason``).
        spans: its value -> ``(microsecond, value of tag any_of)`` pairs.
        any_of: a second tag a window matches any of the values of (``device``), or ``None``.
    """
    out: list[Window] = []

    def close(value: str, run: list[tuple[int, str]]) -> None:
        match: tuple[tuple[str, tuple[str, ...]], ...] = ((pinned, (value,)),)
        if any_of is not None:
            match += ((any_of, tuple(sorted(set(map(_second, run))))),)
        out.append(Window(match, run[0][0] * 1_000, run[-1][0] * 1_000 + SLOTS_PER_US - 1))

    for value, items in spans.items():
        ordered = sorted(items)
        times = list(map(_first, ordered))
        if not times or max(map(sub, times[1:], times[:-1]), default=0) <= _WINDOW_GAP_US:
            if ordered:  # one run, found in C-level steps (the common case: a write's few minutes)
                close(value, ordered)
            continue
        run: list[tuple[int, str]] = []
        for item in ordered:
            if run and item[0] - run[-1][0] > _WINDOW_GAP_US:
                close(value, run)
                run = []
            run.append(item)
        if run:
            close(value, run)
    return out


def home_slot(identity: Identity) -> int:
    """The slot a reading tries first: a stable hash of its identity (the same in every process) --
    the CRC-32 of ``gateway NUL boot NUL seq``, continued from the CRC of a boot's prefix."""
    gateway, boot, seq = identity
    return zlib.crc32(str(seq).encode(), _prefix_crc(gateway, boot)) % SLOTS_PER_US


def _prefix_crc(gateway: str, boot: str) -> int:
    """The CRC-32 of ``gateway NUL boot NUL`` (cached: a boot's readings share it)."""
    crc = _PREFIX_CRC.get((gateway, boot))
    if crc is None:
        if len(_PREFIX_CRC) >= 4096:
            _PREFIX_CRC.clear()
        crc = _PREFIX_CRC[(gateway, boot)] = zlib.crc32(f"{gateway}\x00{boot}\x00".encode())
    return crc


_PREFIX_CRC: dict[tuple[str, str], int] = {}


def _place_free(readings: Sequence[Fields], stamps: Sequence[int]) -> Placement | None:
    """:meth:`LineProtocolWrites._place` of a write when nothing is stored in its windows and each reading
    is alone in its (site, device, quantity, microsecond) -- so alone in its series and microsecond, its
    identity nowhere else in the write: every reading new, on page 0 at its home slot, the placement the
    slot search gives then; ``None`` for any other write."""
    alone = {(r.site, r.device, r.quantity, ns // 1_000) for r, ns in zip(readings, stamps, strict=True)}
    if len(alone) != len(readings):
        return None
    crc32 = zlib.crc32
    new: list[tuple[Fields, int, int, int]] = []
    add = new.append
    last_gateway = last_boot = None
    crc = 0
    for r, ns in zip(readings, stamps, strict=True):
        gateway, boot, seq = r.gateway, r.boot, r.seq
        if boot != last_boot or gateway != last_gateway:  # a write's readings come by boot, as a rule
            crc, last_gateway, last_boot = _prefix_crc(gateway, boot), gateway, boot
        add((r, 0, crc32(str(seq).encode(), crc) % SLOTS_PER_US, ns))
    return Placement(new, [])


_first, _second = itemgetter(0), itemgetter(1)


#: The tag of a reading's page of timestamp slots (absent on page 0; see the module docstring).
PAGE_TAG = "page"
#: A place of a reading in one series and microsecond: (page, slot).
Place = tuple[int, int]


@dataclass
class Placement:
    """Where the readings of one write go: ``new`` (reading, page, slot, event time in ns), ``stored``
    (their identity is already held with the same value: not written again), ``conflicts`` (their
    identity is held with another value or unit: refused, :mod:`stormwatch.stores.base`; the reading,
    its time in ns, the stored value as shown and the stored unit)."""

    new: list[tuple[Fields, int, int, int]]
    stored: list[Fields]
    conflicts: list[tuple[Fields, int, Any, str]] = field(default_factory=list)


T_Fields = TypeVar("T_Fields", bound=Fields)


@dataclass
class WireOutcome(Generic[T_Fields]):
    """What became of the readings of :meth:`LineProtocolWrites.write_wires`: counts as
    :class:`~stormwatch.stores.base.WriteOutcome`'s; ``conflicts``: each reading with its time in ns,
    the stored value, unit and time; ``refused``: each with the server's message."""

    new: int = 0
    already: int = 0
    conflicts: list[tuple[T_Fields, tuple[int, Any, str, datetime]]] = field(default_factory=list)
    refused: list[tuple[T_Fields, str]] = field(default_factory=list)

    def held(self, readings: Sequence[T_Fields], stamps: Sequence[int]) -> tuple[list[T_Fields], list[int]]:
        """Those of ``readings`` (and their times) the store now holds as they are (new or already stored)."""
        out = {id(r) for r, _ in (*self.conflicts, *self.refused)}
        if not out:
            return list(readings), list(stamps)
        kept = [(r, ns) for r, ns in zip(readings, stamps, strict=True) if id(r) not in out]
        return [r for r, _ in kept], [ns for _, ns in kept]


class Retryable(Exception):
    """One attempt failed in a way worth retrying (connection error, 408/429/5xx).

    Attributes:
        problem: what went wrong, for the log and the final StoreError.
        wait_s: the server's ``Retry-After`` in seconds, when it gave one.
    """

    def __init__(self, problem: str, wait_s: float | None = None) -> None:
        super().__init__(problem)
        self.problem = problem
        self.wait_s = wait_s


class LineProtocolWrites:
    """Mixin: ``write_lines`` and the ReadingStore writes of a line-protocol store.

    The store provides ``_send(lines)``, ``_stored(measurement, fields, windows)`` (a query),
    ``_lock`` (an RLock), ``batch_lines``, ``clock`` (stamps dead letters), ``rejected_total``
    (refused lines so far), ``_log`` (its module's logger), ``_target()`` (where it writes, for
    logs) and ``_deadletter_topic()``; ``_before_write()`` runs under the lock before each write
    (default: nothing).
    """

    _log: ClassVar[logging.Logger]
    _lock: threading.RLock
    _sleep: Callable[[float], None]
    batch_lines: int
    clock: Clock
    rejected_total: int
    retries: int
    retries_total: int
    backoff_s: float
    max_backoff_s: float

    def _retrying(self, attempt: Callable[[], T], where: str, max_wait_s: float | None = None) -> T:
        """Run ``attempt`` until it returns, retrying on :class:`Retryable` up to ``retries`` times.

        The pause doubles from ``backoff_s`` up to ``max_backoff_s``; a server's ``Retry-After``
        replaces it (bounded by ``max_wait_s`` when given). Any other exception propagates at once.

        Raises:
            StoreError: still failing after ``retries + 1`` attempts (``where`` names the server).
        """
        delay = self.backoff_s
        for n in range(self.retries + 1):
            try:
                return attempt()
            except Retryable as failure:
                problem, wait = failure.problem, failure.wait_s
            if n == self.retries:
                raise StoreError(f"InfluxDB {where} unavailable after {n + 1} attempts: {problem}")
            if wait is None:
                pause = delay
            else:
                pause = wait if max_wait_s is None else min(max_wait_s, wait)
            # DEBUG: the service calling the store reports the outage once (ERROR) and its end (INFO).
            self._log.debug("InfluxDB %s: %s; retrying in %.2fs", where, problem, pause)
            self.retries_total += 1
            self._sleep(pause)
            delay = min(self.max_backoff_s, delay * 2)
        raise AssertionError("unreachable")  # pragma: no cover

    def _send(self, lines: Sequence[str]) -> None:
        raise NotImplementedError

    def _target(self) -> str:
        raise NotImplementedError

    def _deadletter_topic(self) -> str:
        raise NotImplementedError

    def _before_write(self) -> None:
        """Runs under the lock before a write (e.g. create the database)."""

    def _stored(self, measurement: str, fields: tuple[str, ...], windows: Sequence[Window]) -> Iterator[StoredPoint]:
        """The points of ``measurement`` in ``windows`` with their tags and ``fields``.

        Raises:
            StoreError: the server is unavailable or the query failed.
        """
        raise NotImplementedError

    def write_lines(self, lines: Sequence[str]) -> list[tuple[str, str]]:
        """Write line-protocol lines in batches; returns the refused ``(line, server message)``.

        Refused lines are NOT dead-lettered here (see :meth:`write_readings`).

        Raises:
            StoreError: the server is unavailable; nothing may be acknowledged.
        """
        with self._lock:
            self._before_write()
            refused: list[tuple[str, str]] = []
            for i in range(0, len(lines), self.batch_lines):
                refused += [(r.line, r.message) for r in write_split(lines[i:i + self.batch_lines], self._send)]
            return refused

    def _dead_letter_refused(self, refused: list[tuple[str, str]]) -> None:
        if not refused:
            return
        self.rejected_total += len(refused)
        now = self.clock.now()
        letters = []
        for line, message in refused:
            self._log.warning("InfluxDB %s refused a line (dead-lettered as store_rejected): %s -- line: %.200s",
                              self._target(), message, line)
            letters.append(DeadLetter("store_rejected", message, self._deadletter_topic(), line.encode(), now))
        self._write_deadletters(letters, "the dead letter of a refused line")

    def _place(self, readings: Sequence[Fields], stamps: Sequence[int]) -> Placement:
        """Give each reading (its time in ns in ``stamps``) a place no other stored reading holds
        (module docstring)."""
        spans: dict[str, list[tuple[int, str]]] = defaultdict(list)
        sites = {r.site for r in readings}
        if len(sites) == 1:  # one site's write, as a rule: its (microsecond, device) pairs with no append each
            spans[sites.pop()] = list(zip(map(floordiv, stamps, repeat(1_000)), [r.device for r in readings],
                                          strict=True))
        else:
            for r, ns in zip(readings, stamps, strict=True):
                spans[r.site].append((ns // 1_000, r.device))
        # places taken, by series (the tags that make one: tip_size is one of them), microsecond, page and
        # slot; the identities held per device, quantity and microsecond whatever the tip size (a reading
        # stored before it carried a size, delivered again with one, is the same reading), with the
        # (unit, value) each is stored with. Flat keys: most microseconds hold one reading.
        taken: set[tuple[str, str, str, str, str, int, int, int]] = set()
        held: dict[tuple[str, str, str, int, str, str, int], tuple[str, Any]] = {}
        for point in self._stored(READINGS, ("gateway", "boot", "seq", "value"), cover("site", spans, "device")):
            t = point.tags
            gateway, boot, seq, value = point.fields
            us = point.time_ns // 1_000
            site, device, quantity, unit = t.get("site", ""), t.get("device", ""), t.get("quantity", ""), t.get(
                "unit", "")
            taken.add((site, device, quantity, unit, t.get("tip_size", ""), us, int(t.get(PAGE_TAG) or 0),
                       point.time_ns % 1_000))
            held[(site, device, quantity, us, str(gateway), str(boot), int(seq) if seq is not None else -1)] = (
                unit, value)
        if not held:
            free = _place_free(readings, stamps)
            if free is not None:
                return free
        # the series and microseconds with any place taken (most readings are alone in theirs): None
        # where every place is in ``taken``; the slot of the one reading of this write that holds page 0's
        # home slot there and is not yet in ``taken`` (added only when a second reading comes)
        busy: dict[tuple[str, str, str, str, str, int], int | None] = {key[:6]: None for key in taken}
        placement = Placement([], [])
        new = placement.new.append
        prefix_crc, crc32 = _PREFIX_CRC, zlib.crc32
        for r, ns in zip(readings, stamps, strict=True):
            us = ns // 1_000
            site, device, quantity = r.site, r.device, r.quantity
            gateway, boot, seq = r.gateway, r.boot, r.seq
            key = (site, device, quantity, us, gateway, boot, seq)
            stored = held.get(key) if held else None
            if stored is not None:
                unit, value = stored
                if unit == r.unit and value is not None and float(value) == float(r.value):
                    placement.stored.append(r)
                else:  # the identity holds another measurement: refused, never written over it
                    shown = value if value is None or quantity != RAIN_TIPS else int(value)
                    placement.conflicts.append((r, ns, shown, unit))
                continue
            unit = r.unit
            held[key] = (unit, float(r.value))
            series = (site, device, quantity, unit, r.tip_size or "", us)
            crc = prefix_crc.get((gateway, boot))
            slot = (home_slot((gateway, boot, seq)) if crc is None else crc32(str(seq).encode(), crc) % SLOTS_PER_US)
            page = 0
            if series in busy:  # another point at this series and microsecond: find a free place
                first = busy[series]
                if first is not None:
                    taken.add((*series, 0, first))
                    busy[series] = None
                home = slot
                while (*series, page, slot) in taken:
                    slot = (slot + 1) % SLOTS_PER_US
                    if slot == home:  # every slot of this page is taken: the next page
                        page += 1
                taken.add((*series, page, slot))
            else:
                busy[series] = slot
            new((r, page, slot, ns))
        return placement

    def write_checked(self, readings: Sequence[Reading], *, late: bool = False) -> WriteOutcome:
        """Write readings as ``readings`` points, none over another (module docstring), and say what
        became of each (:meth:`stormwatch.stores.base.ReadingStore.write_checked`): a reading whose
        identity is stored at its series and microsecond with the same value is not written again; with
        another value it is a conflict; a line the server refuses (HTTP 400) is returned as refused,
        with the server's message -- the caller dead-letters it (ingest: published and counted).

        Raises:
            StoreError: the server is unavailable (nothing may be acknowledged).
        """
        outcome = self.write_wires(readings, [time_ns(r.time) for r in readings], late=late)
        return WriteOutcome(outcome.new, outcome.already, tuple(Conflict(r, *c[1:]) for r, c in outcome.conflicts),
                            tuple(Refused(r, message) for r, message in outcome.refused))

    def write_wires(self, readings: Sequence[T_Fields], stamps: Sequence[int], *, late: bool = False,
                    ) -> WireOutcome[T_Fields]:
        """:meth:`write_checked` of readings in any form that has their fields (:class:`Fields`; a
        decoded wire reading, :class:`stormwatch.fastwire.Wire`) and their times in ns: no
        :class:`~stormwatch.contract.Reading` made. A conflict comes back as the reading with
        ``(time in ns, stored value, stored unit, stored time)``, a refusal with the server's message.

        Raises:
            StoreError: the server is unavailable (nothing may be acknowledged).
        """
        if not readings:
            return WireOutcome()
        with self._lock:
            self._before_write()
            placement = self._place(readings, stamps)
            lines = reading_lines(placement.new, late=late)
            refused = self.write_lines(lines)
            by_line: dict[str, Any] = {}
            if refused:
                self.rejected_total += len(refused)
                by_line = {line: placed[0] for line, placed in zip(lines, placement.new, strict=True)}
                for line, message in refused:
                    self._log.warning("InfluxDB %s refused a reading (store_rejected): %s -- line: %.200s",
                                      self._target(), message, line)
            return WireOutcome(new=len(lines) - len(refused), already=len(placement.stored),
                               conflicts=[(r, (ns, shown, unit, from_ns(ns))) for r, ns, shown, unit
                                          in placement.conflicts],
                               refused=[(by_line[line], message) for line, message in refused])

    def write_readings(self, readings: Sequence[Reading], *, late: bool = False) -> int:
        """Write readings (:meth:`write_checked`); returns how many were new. Conflicts and refused
        readings are kept as dead letters in the ``deadletter`` measurement and logged
        (:func:`~stormwatch.stores.base.keep_refusals`).

        Raises:
            StoreError: the server is unavailable (nothing may be acknowledged).
        """
        outcome = self.write_checked(readings, late=late)
        keep_refusals(self, outcome, self.clock.now())  # type: ignore[arg-type]
        return outcome.new

    def supersede(self, reading: Reading) -> Reading | None:
        """See :meth:`stormwatch.stores.base.ReadingStore.supersede`: the stored point of the reading's
        identity at its series and microsecond is written again at its own timestamp slot and page --
        InfluxDB replaces a point's fields when measurement, tags and time are the same -- with the
        reading's fields.

        Raises:
            StoreError: the server is unavailable or refused the line; nothing was changed.
        """
        us = time_ns(reading.time) // 1_000
        window = cover("site", {reading.site: [(us, reading.device)]}, "device")
        with self._lock:
            self._before_write()
            for point in self._stored(READINGS, ("gateway", "boot", "seq", "value", "raw", "flags"), window):
                t = point.tags
                gateway, boot, seq, value, raw, flags = point.fields
                if ((str(gateway), str(boot), int(seq) if seq is not None else -1) != reading.identity
                        or point.time_ns // 1_000 != us or t.get("quantity") != reading.quantity
                        or t.get("unit") != reading.unit or t.get("tip_size", "") != (reading.tip_size or "")):
                    continue
                line = reading_line(reading, slot=point.time_ns % SLOTS_PER_US, page=int(t.get(PAGE_TAG) or 0))
                refused = self.write_lines([line])
                if refused:
                    raise StoreError(f"InfluxDB {self._target()} refused the correction: {refused[0][1]}")
                old_value = int(value) if reading.quantity == RAIN_TIPS and value is not None else value
                return reading.model_copy(update={
                    "value": old_value, "raw": json.loads(raw) if isinstance(raw, str) and raw else None,
                    "flags": tuple(f for f in str(flags or "").split(",") if f)})
            return None

    def _write_deadletters(self, letters: Sequence[DeadLetter], what: str) -> None:
        """Write dead letters in free timestamp slots (none over another); log any InfluxDB refuses."""
        if not letters:
            return
        # Dead letters are moved on by 1 ns when their time is taken, so a stopped or coarse clock
        # spreads them past their microsecond: look up the second after each receive time.
        wanted = sorted({(d.reason, time_ns(d.received_at)) for d in letters})
        looked_up = [Window((("reason", (reason,)),), ns, ns + _DEADLETTER_SPREAD_NS) for reason, ns in wanted]
        taken = {(p.tags.get("reason", ""), p.time_ns) for p in self._stored(DEADLETTER, ("topic",), looked_up)}
        for line, message in self.write_lines(encode_points(deadletter_points(letters, taken))):
            self._log.error("InfluxDB refused %s: %s -- %.200s", what, message, line)

    def write_events(self, events: Sequence[Event]) -> None:
        """Write events to measurement ``events`` (same event twice = same point).

        Raises:
            StoreError: the server is unavailable.
        """
        self._dead_letter_refused(self.write_lines(encode_points(event_point(e) for e in events)))

    def write_sites(self, sites: Sequence[SiteInfo], at: datetime) -> None:
        """Write the configured sites to measurement ``sites`` (tags ``site``, ``timezone``) at ``at``.

        Raises:
            StoreError: the server is unavailable.
        """
        self._dead_letter_refused(self.write_lines(encode_points(site_point(s, at) for s in sites)))

    def write_deadletters(self, letters: Sequence[DeadLetter]) -> None:
        """Write dead letters to measurement ``deadletter``, none over another (a dead letter at a
        stored one's reason and receive time is moved on by 1 ns).

        Raises:
            StoreError: the server is unavailable.
        """
        with self._lock:
            self._before_write()
            self._write_deadletters(letters, "a dead letter")
