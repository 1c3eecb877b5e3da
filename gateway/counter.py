"""Tip counters: cumulative counter samples → integer tip deltas, and the persisted baseline.

One function, :func:`count_tips`, decides every case (weewx-style "counter delta" with the
plausibility checks of failure-kinds.md #6 and #7; sensors.md "Tipping-bucket rain gauges"):

* first sample ever → baseline, 0 tips;
* rise within ``max_tips_per_s`` × elapsed → that many tips;
* drop that fits a wrap of a ``width_bits`` counter at a plausible rate → tips through the wrap
  (16-bit ``65530 → 4`` = 10 tips);
* any other jump (a drop, or an implausible rise) → *suspect*: 0 tips, the sample is held aside.
  The next sample decides: back near the baseline → it was a glitch (``[115, 49, 115]`` = 0 tips,
  tips since the baseline are counted); a plausible continuation of the suspect sample → the
  counter was reset (``812 → 0 → 3`` = 3 tips: the tips before the reset were already counted,
  the counter restarted at 0). Otherwise the new sample becomes the suspect.
* ``mode: delta`` counters (reset on every read) report the delta itself; a delta above the
  plausible rate is suspect (0 tips, flagged) -- never invented rain.

The state (last good value and its time, a suspect sample) is persisted per device by
:class:`CounterStore` (SQLite in the gateway state dir) so a restart that reads 1,420 again
creates no rain (failure-kinds.md #7).
"""

from __future__ import annotations

import sqlite3
import threading
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from stormwatch.gateway.plan import CounterPlan

#: Contract quantity of a rain gauge's reading: integer tips since the previous poll.
RAIN_QUANTITY = "rain_tips"

CounterOutcome = Literal["baseline", "rise", "wrap", "suspect", "glitch", "reset", "delta"]

#: Quality flags put on a rain reading per outcome (empty for the normal cases).
OUTCOME_FLAGS: dict[str, tuple[str, ...]] = {
    "baseline": ("counter_baseline",),
    "rise": (),
    "wrap": ("counter_wrap",),
    "suspect": ("counter_suspect",),
    "glitch": ("counter_glitch_recovered",),
    "reset": ("counter_reset",),
    "delta": (),
}


@dataclass(frozen=True)
class CounterState:
    """What a counter device remembers between samples.

    Attributes:
        value: last trusted counter value (tips, 0 .. 2**width_bits - 1).
        time: event time (UTC) of ``value``.
        suspect_value, suspect_time: a sample that did not fit ``value`` and awaits confirmation.
    """

    value: int
    time: datetime
    suspect_value: int | None = None
    suspect_time: datetime | None = None


@dataclass(frozen=True)
class CounterResult:
    """Outcome of one sample: ``tips`` (int ≥ 0), the new ``state`` and what happened."""

    tips: int
    state: CounterState
    outcome: CounterOutcome

    @property
    def flags(self) -> tuple[str, ...]:
        return OUTCOME_FLAGS[self.outcome]


class CounterError(ValueError):
    """A counter sample that is not a whole number in ``0 .. 2**width_bits - 1``."""


def _allowed(spec: CounterPlan, since: datetime, now: datetime) -> float:
    """Most tips plausible between two event times (``max_tips_per_s`` × elapsed seconds)."""
    return spec.max_tips_per_s * max(0.0, (now - since).total_seconds())


def count_tips(state: CounterState | None, sample: int | float, at: datetime, spec: CounterPlan) -> CounterResult:
    """Turn one counter sample into new tips.

    Args:
        state: the device's previous state, ``None`` for the first sample ever.
        sample: counter value read at ``at`` (cumulative count, or the delta for ``mode: delta``).
        at: event time of the sample (UTC).
        spec: the counter section (:class:`stormwatch.gateway.plan.CounterPlan` or the profile's
            ``CounterSpec``: mode, width_bits, max_tips_per_s).

    Returns:
        :class:`CounterResult`; ``tips`` is an int, never negative.

    Raises:
        CounterError: ``sample`` is not an integer within the counter width.
    """
    modulus = 1 << spec.width_bits
    if isinstance(sample, float):
        if not sample.is_integer():
            raise CounterError(f"counter sample {sample!r} is not a whole number of tips")
        sample = int(sample)
    if not 0 <= sample < modulus:
        raise CounterError(f"counter sample {sample} outside 0..{modulus - 1} ({spec.width_bits}-bit)")

    if spec.mode == "delta":
        if state is None:
            # Tips accumulated over an unknown period before the first read: not attributable.
            return CounterResult(0, CounterState(0, at), "baseline")
        if sample <= _allowed(spec, state.time, at):
            return CounterResult(sample, CounterState(0, at), "delta")
        return CounterResult(0, CounterState(0, at, sample, at), "suspect")

    if state is None:
        return CounterResult(0, CounterState(sample, at), "baseline")

    # A plausible continuation of the last trusted value (rise or wrap)?
    forward = (sample - state.value) % modulus
    if forward <= _allowed(spec, state.time, at):
        outcome: CounterOutcome = "rise" if sample >= state.value else "wrap"
        if state.suspect_value is not None:
            outcome = "glitch"
        return CounterResult(forward, CounterState(sample, at), outcome)

    if state.suspect_value is not None and state.suspect_time is not None:
        # A plausible continuation of the suspect sample: the counter really restarted.
        onward = sample - state.suspect_value
        if onward >= 0 and onward <= _allowed(spec, state.suspect_time, at):
            # Tips counted since the restart at 0, when that is plausible since the last good
            # sample; otherwise only the tips after the suspect sample.
            since_zero = sample if sample <= _allowed(spec, state.time, at) else onward
            return CounterResult(since_zero, CounterState(sample, at), "reset")

    return CounterResult(0, CounterState(state.value, state.time, sample, at), "suspect")


_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS counter_state (device TEXT PRIMARY KEY, value INTEGER NOT NULL,"
    " time TEXT NOT NULL, suspect_value INTEGER, suspect_time TEXT)"
)


def ensure_schema(db: sqlite3.Connection) -> None:
    """Create the ``counter_state`` table if missing."""
    db.execute(_SCHEMA)


def write_state(db: sqlite3.Connection, device: str, state: CounterState) -> None:
    """Upsert ``state`` within the caller's transaction.

    The gateway writes the counter state in the SAME transaction as the rain reading it produced
    (:meth:`stormwatch.gateway.outbox.Outbox.add`): a crash between the two would otherwise count tips twice
    (reading kept, baseline lost) or lose them (baseline kept, reading lost).
    """
    db.execute(
        "INSERT OR REPLACE INTO counter_state (device, value, time, suspect_value, suspect_time)"
        " VALUES (?, ?, ?, ?, ?)",
        (
            device,
            state.value,
            state.time.isoformat(),
            state.suspect_value,
            None if state.suspect_time is None else state.suspect_time.isoformat(),
        ),
    )


class CounterStore:
    """Counter states per device, persisted in SQLite (the gateway's ``gateway.sqlite3``).

    Thread-safe (one lock). :meth:`save` commits at once (``synchronous=FULL``: a baseline lost on
    power failure would double-count rain); the gateway itself saves through
    :meth:`stormwatch.gateway.outbox.Outbox.add` together with the reading.
    """

    def __init__(self, path: Path) -> None:
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        ensure_schema(self._db)

    def load(self, device: str) -> CounterState | None:
        """The persisted state of ``device``, or ``None`` if it never produced a sample."""
        with self._lock:
            row = self._db.execute(
                "SELECT value, time, suspect_value, suspect_time FROM counter_state WHERE device = ?", (device,)
            ).fetchone()
        if row is None:
            return None
        return CounterState(
            value=int(row[0]),
            time=datetime.fromisoformat(row[1]),
            suspect_value=None if row[2] is None else int(row[2]),
            suspect_time=None if row[3] is None else datetime.fromisoformat(row[3]),
        )

    def save(self, device: str, state: CounterState) -> None:
        """Persist ``state`` for ``device`` (committed before return)."""
        with self._lock:
            write_state(self._db, device, state)

    def close(self) -> None:
        with self._lock:
            self._db.close()
