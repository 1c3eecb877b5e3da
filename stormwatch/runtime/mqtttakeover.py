"""Telling a session taken over by another client with the same client id from an ordinary lost connection.

MQTT allows one connection per client id: when a second client connects with the id of a
connected one, the broker closes the first (MQTT 3.1.1 section 3.1.4, step 2; MQTT 5 sends it a
DISCONNECT with reason code 0x8E "Session taken over" first, section 4.13). Two processes
configured with one id (two gateways copied from one site file, two ingest workers with one
``--client-id``) then take the session from each other every time they reconnect -- about once a
second forever with paho's default backoff, each side seeing only "Unspecified error".

:class:`TakeoverGuard` tells each loss of a connection apart, so the process says once, clearly, that
another client holds its id, and backs off instead of fighting for the session: at most one
takeover every five minutes after an episode's first minute.

The design: docs/runtime.md ("The modules", `stormwatch/runtime/mqtttakeover.py`).
"""

from __future__ import annotations

from dataclasses import dataclass

#: MQTT 5 reason code "Session taken over" (MQTT 5.0 section 2.4, table 2-6).
SESSION_TAKEN_OVER = 0x8E


@dataclass(frozen=True)
class LossVerdict:
    """What one lost connection means.

    Attributes:
        takeover: the loss counts as a (certain or suspected) session takeover.
        report: this is the first loss of a takeover episode that is sure enough to report.
        quiet: a loss inside an episode already reported (log it at DEBUG).
        streak: consecutive takeovers so far (0 when this loss is not one).
        reconnect_delay_s: whole seconds to wait before reconnecting.
    """

    takeover: bool
    report: bool
    quiet: bool
    streak: int
    reconnect_delay_s: int


class TakeoverGuard:
    """Classifies the lost connections of one client (module docstring). Not thread-safe: call it
    from the client's network thread only.

    Args:
        short_s: a connection the broker closes sooner than this after accepting it is suspect (s).
        suspect_after: suspected takeovers in a row before one is reported (MQTT 3.1.1).
        quiet_s: a connection that holds this long ends an episode (s).
        min_delay_s, max_delay_s: reconnect delay after the first takeover, and the settled delay (whole s).
        settle_s: seconds from an episode's first takeover after which every delay is ``max_delay_s``.

    Raises:
        ValueError: a bound that makes no sense (``suspect_after < 1``, delays out of order).
    """

    def __init__(self, *, short_s: float = 10.0, suspect_after: int = 3, quiet_s: float = 600.0,
                 min_delay_s: int = 1, max_delay_s: int = 300, settle_s: float = 60.0) -> None:
        if (suspect_after < 1 or not 1 <= min_delay_s <= max_delay_s or short_s <= 0 or quiet_s < short_s
                or settle_s < 0):
            raise ValueError("TakeoverGuard needs suspect_after >= 1, 1 <= min_delay_s <= max_delay_s, "
                             "0 < short_s <= quiet_s, settle_s >= 0")
        self.short_s = short_s
        self.suspect_after = suspect_after
        self.quiet_s = quiet_s
        self.min_delay_s = min_delay_s
        self.max_delay_s = max_delay_s
        self.settle_s = settle_s
        self._streak_start: float | None = None  # when the current run of takeovers began
        #: Losses counted as takeovers (certain or suspected), since the start.
        self.takeovers = 0
        self._streak = 0
        self._connected_at: float | None = None
        self._reported = False

    @property
    def in_episode(self) -> bool:
        """A takeover has been reported and no connection has held for ``quiet_s`` since."""
        return self._reported

    def connected(self, now: float) -> None:
        """The broker accepted a connection at ``now``."""
        self._connected_at = now

    def lost(self, now: float, *, taken_over: bool, broker_closed: bool) -> LossVerdict:
        """A connection ended at ``now``.

        Args:
            taken_over: the broker said so (MQTT 5 reason code 0x8E).
            broker_closed: the broker closed the connection without a reason (the MQTT 3.1.1 way;
                not a keep-alive timeout of ours, not our own disconnect).
        """
        held = float("inf") if self._connected_at is None else now - self._connected_at
        self._connected_at = None
        if held >= self.quiet_s:
            self._reported = False
            self._streak = 0
        # in a reported episode, a connection the other process takes after our back-off held long
        going_on = self._reported and held < self.quiet_s
        if not (taken_over or (broker_closed and (held < self.short_s or going_on))):
            self._streak = 0
            self._streak_start = None
            return LossVerdict(False, False, self._reported, 0, self.min_delay_s)
        if self._streak == 0 or self._streak_start is None:
            self._streak_start = now
        self._streak += 1
        self.takeovers += 1
        report = not self._reported and (taken_over or self._streak >= self.suspect_after)
        quiet = self._reported
        self._reported = self._reported or report
        if now - self._streak_start >= self.settle_s:
            delay = self.max_delay_s
        else:
            delay = min(self.max_delay_s, self.min_delay_s * 2 ** min(self._streak - 1, 30))
        return LossVerdict(True, report, quiet, self._streak, delay)
