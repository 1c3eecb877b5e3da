"""The write side shared by the InfluxDB stores (:mod:`stormwatch.ingest.influx1`, :mod:`stormwatch.ingest.influx2`).

Lines come from :mod:`stormwatch.ingest.lineprotocol` and go out in batches of at most ``batch_lines``
through the store's ``_send`` (one request; raises :class:`~stormwatch.ingest.splitwrite.BatchRejected` when
the server refuses the content). A refused batch is bisected (:func:`stormwatch.ingest.splitwrite.write_split`)
so only the refused lines are lost; each is logged at WARNING and dead-lettered as
``store_rejected`` (failure-kinds.md #15).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import ClassVar, TypeVar

from stormwatch.clock import Clock
from stormwatch.contract import Event, Reading
from stormwatch.ingest.lineprotocol import deadletter_points, encode_points, event_point, reading_line, site_point
from stormwatch.ingest.splitwrite import write_split
from stormwatch.store import DeadLetter, SiteInfo, StoreError

T = TypeVar("T")


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

    The store provides ``_send(lines)``, ``_lock`` (an RLock), ``batch_lines``, ``clock`` (stamps
    dead letters), ``rejected_total`` (refused lines so far), ``_log`` (its module's logger),
    ``_target()`` (where it writes, for logs) and ``_deadletter_topic()``; ``_before_write()`` runs
    under the lock before each :meth:`write_lines` (default: nothing).
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
            self._log.info("InfluxDB %s: %s; retrying in %.2fs", where, problem, pause)
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
        for line, message in self.write_lines(encode_points(deadletter_points(letters))):
            self._log.error("InfluxDB refused the dead letter of a refused line too: %s -- %.200s", message, line)

    def write_readings(self, readings: Sequence[Reading], *, late: bool = False) -> int:
        """Write readings as ``readings`` points; returns how many points were written (a duplicate
        overwrites itself and is counted again).

        Raises:
            StoreError: the server is unavailable (nothing may be acknowledged).
        """
        lines = [reading_line(r, late=late) for r in readings]
        refused = self.write_lines(lines)
        self._dead_letter_refused(refused)
        return len(lines) - len(refused)

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
        """Write dead letters to measurement ``deadletter``.

        Raises:
            StoreError: the server is unavailable.
        """
        for line, message in self.write_lines(encode_points(deadletter_points(letters))):
            self._log.error("InfluxDB refused a dead letter: %s -- %.200s", message, line)
