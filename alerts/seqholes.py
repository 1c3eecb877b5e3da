"""Sequence holes: readings a gateway made that the alert engine has not received (yet).

Every reading a gateway publishes carries its ``boot`` and a ``seq`` that counts up by one within
that boot (:mod:`stormwatch.gateway.service`), in the order the readings were made. A live reading
whose ``seq`` jumps past the one before it says, with certainty, that readings are missing between
them -- not that a sensor was silent: the broker lost them (a crash, a session that came back
empty) and the gateway, which keeps every reading until ingest confirms it stored
(:mod:`stormwatch.storedack`), will send them again, or ingest has them in the store already.

The design: docs/alerts.md ("The modules", `alerts/seqholes.py`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from time import monotonic

from stormwatch.contract import MANUAL_GATEWAY, Reading, reading_source
from stormwatch.wire import format_time

log = logging.getLogger(__name__)

#: Real seconds a hole is waited for before the rules decide without its readings: the gateway
#: re-sends what stays unconfirmed after a 10 s grace (sweeps) or a 30 s probe (doubling),
#: :mod:`stormwatch.gateway.publisher`; two minutes covers a sweep and a probe on a loaded machine.
DEFAULT_HOLD_S = 120.0
#: A jump of more sequence numbers than this is not waited for (a gateway's outbox never held that
#: many unconfirmed readings of one boot; its seq restarted without a new boot): logged, not held.
MAX_HOLE_SEQS = 100_000
#: The ``gateway`` of readings that no gateway polled (:func:`stormwatch.contract.reading_source`).
_NOT_POLLED = frozenset({MANUAL_GATEWAY, "import", "station"})


@dataclass
class Hole:
    """Readings ``first``..``last`` (inclusive) of ``gateway``/``boot``, made between ``after``
    (the event time of reading ``first - 1``) and ``before`` (that of ``last + 1``), UTC.

    ``missing`` are the sequence numbers not received yet; ``opened`` the real (monotonic) second
    the hole was seen."""

    gateway: str
    boot: str
    first: int
    last: int
    after: datetime
    before: datetime
    opened: float
    missing: set[int] = field(default_factory=set)
    open_end: bool = False  # ``before`` unknown (the reading after the hole was refused): read to the end

    def describe(self) -> str:
        """``gw-1/9f1c2a seq 412-749 (338 readings, 16:31:00Z-18:06:00Z)``, for logs."""
        return (f"{self.gateway}/{self.boot} seq {self.first}-{self.last} ({len(self.missing)} of "
                f"{self.last - self.first + 1} readings, made {format_time(self.after)} to {format_time(self.before)})")


class SequenceHoles:
    """The open sequence holes of one site's gateways (see the module docstring).

    Args:
        site: the site id (logs).
        hold_s: real seconds a hole is waited for (:data:`DEFAULT_HOLD_S`); must be > 0.
        now: the real (monotonic) clock, seconds; injected by tests.

    Raises:
        ValueError: ``hold_s`` not > 0.
    """

    def __init__(self, site: str, hold_s: float = DEFAULT_HOLD_S, now: Callable[[], float] = monotonic) -> None:
        if not hold_s > 0:
            raise ValueError(f"hold_s must be > 0, got {hold_s}")
        self.site = site
        self.hold_s = hold_s
        self._now = now
        self._last: dict[tuple[str, str], tuple[int, datetime]] = {}  # (gateway, boot) -> newest seq, its time
        self._holes: list[Hole] = []
        self.given_up = 0  # readings the rules decided without (holes given up)
        self.filled = 0  # readings of holes that arrived

    def saw(self, reading: Reading) -> bool:
        """Note a live reading; ``True`` when the holes changed (one opened or filled: the hold moves)."""
        if reading_source(reading) != "gateway":
            return False
        key = (reading.gateway, reading.boot)
        seq, t = reading.seq, reading.time
        last = self._last.get(key)
        if last is None or seq > last[0]:
            self._last[key] = (seq, t)
            if last is not None and seq > last[0] + 1:
                return self._open(key, last[0], seq, min(last[1], t), max(last[1], t))
            return False
        return self._fill(key, seq)

    def saw_run(self, readings: Sequence[Reading]) -> bool:
        """Note a message's live readings when none opens or fills a hole -- each gateway reading the next
        ``seq`` of its ``(gateway, boot)`` (or its first) -- and say ``True``; else note nothing and say
        ``False`` (the caller takes them one by one with :meth:`saw`). The common message, checked once."""
        if readings and reading_source(readings[0]) == "gateway":
            # a poll cycle (nearly every message): one run of seqs of one (gateway, boot), read from the
            # models' __dict__ (a pydantic model's attribute costs about 4x a plain object's)
            first = readings[0].__dict__
            gateway, boot, seq = first["gateway"], first["boot"], first["seq"]
            last = self._last.get((gateway, boot))
            if last is None or seq == last[0] + 1:
                for r in readings:
                    fields = r.__dict__
                    if fields["seq"] != seq or fields["gateway"] != gateway or fields["boot"] != boot:
                        break
                    seq += 1
                else:
                    self._last[(gateway, boot)] = (seq - 1, readings[-1].__dict__["time"])
                    return True
        return self._saw_each(readings)

    def saw_cycle(self, gateway: str, boot: str, first: int, last: int, t: datetime) -> bool:
        """:meth:`saw_run` of a poll cycle decoded as columns (:class:`stormwatch.fastwire.Cycle`): readings
        ``first``..``last`` of ``gateway``/``boot``, all made at ``t``; nothing is noted when ``False``."""
        if gateway in _NOT_POLLED:
            return True  # (reading_source's other sources: no seqs of a gateway to follow)
        key = (gateway, boot)
        prev = self._last.get(key)
        if prev is not None and first != prev[0] + 1:
            return False
        self._last[key] = (last, t)
        return True

    def _saw_each(self, readings: Sequence[Reading]) -> bool:
        """:meth:`saw_run` of a message that is not one run of seqs: reading by reading."""
        nexts: dict[tuple[str, str], tuple[int, datetime]] = {}
        for r in readings:
            if reading_source(r) != "gateway":
                continue
            key = (r.gateway, r.boot)
            last = nexts.get(key) or self._last.get(key)
            if last is not None and r.seq != last[0] + 1:
                return False
            nexts[key] = (r.seq, r.time)
        self._last.update(nexts)
        return True

    def _open(self, key: tuple[str, str], prev_seq: int, seq: int, after: datetime, before: datetime | None,
              ) -> bool:
        """A hole between readings ``prev_seq`` and ``seq`` of ``key`` (gateway, boot), made from
        ``after`` to ``before`` (``None``: unknown); ``True`` when it is waited for."""
        gateway, boot = key
        missing = seq - prev_seq - 1
        if missing > MAX_HOLE_SEQS:
            log.warning("%s: gateway %s/%s jumped from seq %d to %d: %d readings missing, too many to wait for; "
                        "the rules decide without them", self.site, gateway, boot, prev_seq, seq, missing)
            return False
        hole = Hole(gateway, boot, prev_seq + 1, seq - 1, after, after if before is None else before, self._now(),
                    set(range(prev_seq + 1, seq)), open_end=before is None)
        self._holes.append(hole)
        log.info("%s: readings %s not received (the broker lost them?): the rules wait for them up to %.0f s",
                 self.site, hole.describe(), self.hold_s)
        return True

    def _fill(self, key: tuple[str, str], seq: int) -> bool:
        for hole in self._holes:
            if (hole.gateway, hole.boot) == key and seq in hole.missing:
                hole.missing.discard(seq)
                self.filled += 1
                if not hole.missing:
                    self._holes.remove(hole)
                    log.info("%s: readings %s-%d of %s/%s all received: the rules go on", self.site, hole.first,
                             hole.last, hole.gateway, hole.boot)
                    return True
                return False
        return False

    def refused(self, gateway: str, boot: str, seq: int) -> bool:
        """Note a live reading refused as invalid (ingest dead-letters it): its sequence number arrived,
        its time may be unreadable. It fills a hole, or moves the sequence on (a jump past the one before
        opens a hole up to it, dated from the reading before); ``True`` when the holes changed."""
        key = (gateway, boot)
        last = self._last.get(key)
        if last is None:
            return False  # no time to date anything from; the next valid reading starts the sequence
        if seq <= last[0]:
            return self._fill(key, seq)
        self._last[key] = (seq, last[1])
        return seq > last[0] + 1 and self._open(key, last[0], seq, last[1], None)

    def saw_stored(self, readings: Iterable[Reading]) -> bool:
        """Note readings read from the store (warm-up, catch-up, a hole's window): they fill holes and
        move each gateway's newest sequence number on, but open none -- a reading ingest refused is a
        dead letter, not a stored row, so stored sequence numbers have holes of their own. ``True``
        when a hole closed."""
        closed = False
        for r in readings:
            if reading_source(r) != "gateway":
                continue
            key = (r.gateway, r.boot)
            last = self._last.get(key)
            if last is None or r.seq > last[0]:
                self._last[key] = (r.seq, r.time)
            elif self._holes:
                closed = self._fill(key, r.seq) or closed
        return closed

    def expire(self) -> list[Hole]:
        """Give up the holes open for ``hold_s`` or longer (logged at WARNING); returns them."""
        now = self._now()
        old = [h for h in self._holes if now - h.opened >= self.hold_s]
        for hole in old:
            self._holes.remove(hole)
            self.given_up += len(hole.missing)
            log.warning("%s: readings %s did not arrive within %.0f s: the rules decide without them (if they "
                        "come later, they are late data and re-evaluated)", self.site, hole.describe(), self.hold_s)
        return old

    def hold(self) -> datetime | None:
        """The event time the site's engine must stay below (the oldest open hole's ``after``), or ``None``."""
        return min((h.after for h in self._holes), default=None)

    def windows(self) -> list[tuple[datetime, datetime | None]]:
        """The event-time spans ``(after, before)`` of the open holes, to read back from the store
        (``before`` ``None``: unknown, read to the end)."""
        return [(h.after, None if h.open_end else h.before) for h in self._holes]

    def taken(self) -> dict[str, int]:
        """Per gateway boot, how many of its readings (``seq`` 0 up to the newest seen) were taken,
        live or from the store -- the ones of open holes aside. A restarted engine that warmed up
        from the store counts what it read there (a lockstep clock compares it with what was made)."""
        out: dict[str, int] = {}
        for (_gateway, boot), (seq, _t) in self._last.items():
            out[boot] = out.get(boot, 0) + seq + 1
        for hole in self._holes:
            out[hole.boot] -= len(hole.missing)
        return out

    @property
    def open(self) -> list[Hole]:
        """The open holes, oldest first."""
        return list(self._holes)
