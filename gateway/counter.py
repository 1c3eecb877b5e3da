"""Tip counters: cumulative counter samples → integer tip deltas, and the persisted baseline.

One function, :func:`count_tips`, decides every case, for the gateway's live counters and for the
cumulative totals of imported files alike (``stormwatch import/replay --tips-per-row cumulative``).
Plausibility is physical: no rise or wrap may imply more rain than the world-record depth–duration
envelope over the elapsed event time (:func:`stormwatch.physics.max_tips`, rain-records.md;
failure-kinds.md #6, #7, #24, #26), optionally tightened by the gauge's profile
(``counter.max_intensity_mm_h``). A baseline, a wrap, a glitch and a reset are told apart; rain that
cannot be known is a data gap, never invented; a restart reading the same total creates no rain.

The design: docs/gateway.md ("The modules", `gateway/counter.py`).
"""

from __future__ import annotations

import sqlite3
import threading
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Literal, Protocol

from stormwatch.physics import FLAG_EXTREME_RATE, max_tips, review_mm
from stormwatch.rain import TipResolution

#: Contract quantity of a rain gauge's reading: integer tips since the previous poll.
RAIN_QUANTITY = "rain_tips"

CounterOutcome = Literal["baseline", "rise", "wrap", "suspect", "glitch", "reset", "delta"]

#: Flag of a first sample: 0 tips, the baseline of the ones to come.
FLAG_BASELINE = "counter_baseline"
#: Flag of tips counted through a counter wrap.
FLAG_WRAP = "counter_wrap"
#: Flag of a sample that fits neither the trusted value nor a wrap: 0 tips, rain at its time unknown.
FLAG_SUSPECT = "counter_suspect"
#: Flag of tips counted from the trusted value after a one-sample glitch.
FLAG_GLITCH = "counter_glitch_recovered"
#: Flag of a confirmed reset: the interval since the last trusted sample is a data gap (0 tips there).
FLAG_RESET = "counter_reset"
#: Flag of tips (or none) counted over an outage longer than two poll intervals: real, time unknown.
FLAG_CATCH_UP = "counter_catch_up"

#: Quality flags put on a rain reading per outcome (empty for the normal cases).
OUTCOME_FLAGS: dict[str, tuple[str, ...]] = {
    "baseline": (FLAG_BASELINE,),
    "rise": (),
    "wrap": (FLAG_WRAP,),
    "suspect": (FLAG_SUSPECT,),
    "glitch": (FLAG_GLITCH,),
    "reset": (FLAG_RESET,),
    "delta": (),
}


class CounterLike(Protocol):
    """What :func:`count_tips` reads of a counter description: the profile's ``CounterSpec``,
    the gateway plan's ``CounterPlan`` or an import's counter (``width_bits`` ``None``: no wrap)."""

    @property
    def mode(self) -> Literal["cumulative", "delta"]: ...

    @property
    def width_bits(self) -> int | None: ...

    @property
    def max_intensity_mm_h(self) -> float | None: ...

    @property
    def tip_resolution(self) -> TipResolution: ...


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
    """Outcome of one sample.

    Attributes:
        tips: new tips (int ≥ 0), never more than the envelope allows since ``gap_start`` or the
            previous trusted sample.
        state: the new state.
        outcome: what happened.
        catch_up: the tips span an outage (more than two expected intervals since the trusted sample).
        gap_start: for ``reset``: the time of the last trusted sample -- from there to this sample
            rain is unknown (a data gap); else ``None``.
        extreme: the tips reach the review line over the interval they cover (extreme but possible
            rain: counted, flagged ``rain_extreme_rate``).
    """

    tips: int
    state: CounterState
    outcome: CounterOutcome
    catch_up: bool = False
    gap_start: datetime | None = None
    extreme: bool = False

    @property
    def flags(self) -> tuple[str, ...]:
        """The reading's quality flags (:data:`OUTCOME_FLAGS`, plus ``counter_catch_up`` and
        ``rain_extreme_rate``)."""
        return (OUTCOME_FLAGS[self.outcome] + ((FLAG_CATCH_UP,) if self.catch_up else ())
                + ((FLAG_EXTREME_RATE,) if self.extreme else ()))


class CounterError(ValueError):
    """A counter sample that is not a whole number in ``0 .. 2**width_bits - 1`` (or negative)."""


def allowed_tips(spec: CounterLike, since: datetime, now: datetime) -> int:
    """Most tips physically possible between two event times (the envelope, or the profile's
    tighter ``max_intensity_mm_h``; :func:`stormwatch.physics.max_tips`)."""
    return max_tips(float(spec.tip_resolution.mm), (now - since).total_seconds(), spec.max_intensity_mm_h)


def _extreme(spec: CounterLike, tips: int, since: datetime, now: datetime) -> bool:
    """Whether ``tips`` between two event times reach the review line (extreme but possible)."""
    return tips > 0 and tips * float(spec.tip_resolution.mm) >= review_mm((now - since).total_seconds())


def count_tips(state: CounterState | None, sample: int | float, at: datetime, spec: CounterLike,
               expected_interval_s: float | None = None, gap_before: bool = False) -> CounterResult:
    """Turn one counter sample into new tips.

    Args:
        state: the device's previous state, ``None`` for the first sample ever.
        sample: counter value read at ``at`` (cumulative count, or the delta for ``mode: delta``).
        at: event time of the sample (UTC).
        spec: the counter (:class:`CounterLike`: mode, width_bits, tip resolution, optional
            ``max_intensity_mm_h``).
        expected_interval_s: the poll interval; a sample more than twice that after the trusted
            one is a catch-up (``counter_catch_up``). ``None``: never (file rows).
        gap_before: ``mode: delta`` only: the device reset a count nobody read since the trusted
            sample (:attr:`stormwatch.gateway.drivers.PointValue.gap_before`): the sample's tips are
            counted and the time since the trusted sample is a data gap (``reset``).

    Returns:
        :class:`CounterResult`; ``tips`` is an int, never negative, never beyond the envelope.

    Raises:
        CounterError: ``sample`` is not a whole number within the counter width.
    """
    width = spec.width_bits
    if isinstance(sample, float):
        if not sample.is_integer():
            raise CounterError(f"counter sample {sample!r} is not a whole number of tips")
        sample = int(sample)
    if sample < 0 or (width is not None and sample >= 1 << width):
        span = "0 or more" if width is None else f"0..{(1 << width) - 1} ({width}-bit)"
        raise CounterError(f"counter sample {sample} outside {span}")

    if state is None:
        # Tips accumulated over an unknown period before the first read: not attributable.
        return CounterResult(0, CounterState(0 if spec.mode == "delta" else sample, at), "baseline")
    since = state.time
    later = max(since, at)
    catch_up = expected_interval_s is not None and (at - since).total_seconds() > 2 * expected_interval_s

    if spec.mode == "delta":
        if gap_before:
            tips = sample if sample <= allowed_tips(spec, since, at) else 0
            return CounterResult(tips, CounterState(0, later), "reset", gap_start=since,
                                 extreme=_extreme(spec, tips, since, at))
        if sample <= allowed_tips(spec, since, at):
            return CounterResult(sample, CounterState(0, later), "delta", catch_up,
                                 extreme=_extreme(spec, sample, since, at))
        return CounterResult(0, CounterState(0, later), "reset", gap_start=since)

    # A plausible continuation of the last trusted value (rise or wrap)?
    forward = sample - state.value if width is None else (sample - state.value) % (1 << width)
    if 0 <= forward <= allowed_tips(spec, since, at):
        outcome: CounterOutcome = "rise" if sample >= state.value else "wrap"
        if state.suspect_value is not None:
            outcome = "glitch"
        return CounterResult(forward, CounterState(sample, later), outcome, catch_up,
                             extreme=_extreme(spec, forward, since, at))

    if state.suspect_value is not None and state.suspect_time is not None:
        # A plausible continuation of the suspect sample: the counter really restarted. The tips
        # after the suspect sample are known; before it, since the trusted sample, rain is unknown.
        onward = sample - state.suspect_value
        if 0 <= onward <= allowed_tips(spec, state.suspect_time, at):
            return CounterResult(onward, CounterState(sample, at), "reset", gap_start=since,
                                 extreme=_extreme(spec, onward, state.suspect_time, at))

    return CounterResult(0, CounterState(state.value, since, sample, at), "suspect")


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
