"""Optional webhook for ordinance events: POST each event's JSON to a URL, with retries.

Each event (:meth:`stormwatch.contract.Event.to_wire`) is POSTed as ``application/json`` with the
standard library (``urllib.request``). A 2xx answer is success; a connection error, a timeout, a
5xx or a 429 is retried with exponential backoff (``base_delay_s`` · 2^k, at most ``max_delay_s``)
up to ``attempts`` tries; a 4xx other than 429 is final (the receiver rejects the payload). Failures
are logged with the reason, never raised into the alert service: the MQTT events topic and the
store remain the record. Delivery runs on one background thread (:class:`BackgroundSender`) so a slow
receiver never blocks the engine. Waits use the service's :class:`~stormwatch.clock.Clock`.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass

from stormwatch.clock import Clock
from stormwatch.contract import Event

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Delivery:
    """Outcome of one event's delivery: ``ok``, attempts made, last HTTP status (None: no answer)."""

    ok: bool
    attempts: int
    status: int | None
    reason: str


class Webhook:
    """POST events to ``url`` with retries (see the module docstring).

    Args:
        url: ``http://`` or ``https://`` endpoint.
        clock: waits between attempts (``clock.sleep``).
        attempts: tries per event (≥ 1).
        base_delay_s: first backoff; doubles each retry.
        max_delay_s: backoff cap.
        timeout_s: per-request timeout (real seconds).

    Raises:
        ValueError: not an http(s) URL or ``attempts`` < 1.
    """

    def __init__(self, url: str, clock: Clock, *, attempts: int = 5, base_delay_s: float = 1.0,
                 max_delay_s: float = 60.0, timeout_s: float = 10.0) -> None:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"webhook URL must be http:// or https://, got {url!r}")
        if attempts < 1:
            raise ValueError("attempts must be >= 1")
        self.url = url
        self.clock = clock
        self.attempts = attempts
        self.base_delay_s = base_delay_s
        self.max_delay_s = max_delay_s
        self.timeout_s = timeout_s

    def delay_s(self, retry: int) -> float:
        """Backoff before retry number ``retry`` (1, 2, ...): base · 2^(retry−1), capped."""
        return float(min(self.max_delay_s, self.base_delay_s * 2 ** (retry - 1)))

    def deliver(self, event: Event) -> Delivery:
        """POST one event, retrying as configured; never raises."""
        body = json.dumps(event.to_wire(), separators=(",", ":"), ensure_ascii=False).encode()
        status: int | None = None
        reason = ""
        for attempt in range(1, self.attempts + 1):
            if attempt > 1:
                self.clock.sleep(self.delay_s(attempt - 1))
            request = urllib.request.Request(self.url, data=body, method="POST",
                                             headers={"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(request, timeout=self.timeout_s) as answer:
                    status = answer.status
                log.info("webhook: %s %s delivered (HTTP %s, attempt %d)", event.kind, event.occurrence, status,
                         attempt)
                return Delivery(True, attempt, status, "ok")
            except urllib.error.HTTPError as exc:
                status, reason = exc.code, f"HTTP {exc.code} {exc.reason}"
                if exc.code < 500 and exc.code != 429:
                    log.error("webhook: %s %s rejected by %s: %s (not retried)", event.kind, event.occurrence,
                              self.url, reason)
                    return Delivery(False, attempt, status, reason)
            except (urllib.error.URLError, TimeoutError, OSError) as exc:
                status, reason = None, f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}"
            log.warning("webhook: %s %s attempt %d/%d failed: %s", event.kind, event.occurrence, attempt,
                        self.attempts, reason)
        log.error("webhook: %s %s not delivered after %d attempts: %s", event.kind, event.occurrence, self.attempts,
                  reason)
        return Delivery(False, self.attempts, status, reason)


class BackgroundSender:
    """Delivers events through ``deliver`` on a background thread, in order.

    Used for outputs that may be slow or away (the webhook, Grafana annotations) so they never
    block the engine's MQTT thread; their own failures are logged by ``deliver``.

    Args:
        deliver: called with each event; its return value is kept in :attr:`results`.
        name: thread name and log label.
    """

    def __init__(self, deliver: Callable[[Event], object], name: str) -> None:
        self.deliver = deliver
        self.name = name
        self._queue: queue.Queue[Event | None] = queue.Queue()
        self.results: list[object] = []
        self._thread = threading.Thread(target=self._work, name=name, daemon=True)
        self._thread.start()

    def send(self, event: Event) -> None:
        """Queue ``event`` for delivery."""
        self._queue.put(event)

    def close(self, timeout_s: float = 30.0) -> None:
        """Deliver what is queued (up to ``timeout_s`` real seconds) and stop."""
        self._queue.put(None)
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            log.error("%s: %d event(s) still queued at stop", self.name, self._queue.qsize())

    def _work(self) -> None:
        while True:
            event = self._queue.get()
            if event is None:
                return
            self.results.append(self.deliver(event))
