"""What the alert service says about gateway status messages: changes once, a flapping gateway once.

Every gateway publishes a retained ``{"state": "online", "boot": ...}`` on its status topic each
time it connects (:mod:`stormwatch.gateway.publisher`). A gateway whose connection flaps, or two
gateways configured with one gateway id taking the MQTT session from each other, connect again and
again: announcing "gateway online" on every connect buries the one line that matters.
:class:`GatewayPresence` decides, per ``(site, gateway)``, how each status is logged.
A status it cannot read (:func:`read_status` says why) is bad input and changes nothing.

The design: docs/alerts.md ("The modules", `alerts/presence.py`).
"""

from __future__ import annotations

import json
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

#: The states a gateway's status message says (stormwatch/topics.py).
STATES = ("online", "offline")

#: Real seconds over which connects are counted.
DEFAULT_WINDOW_S = 300.0
#: Online announcements within the window that make a gateway "flapping".
DEFAULT_FLAP_AFTER = 4


@dataclass(frozen=True)
class Status:
    """What one readable status message says: ``state`` (one of :data:`STATES`), the ``reason`` of an
    offline (``"stopped"``: the operator's stop, not a last will) and the gateway's ``boot``."""

    state: str
    reason: str | None
    boot: str | None


def read_status(payload: bytes) -> Status | str:
    """The :class:`Status` a status message says, or why it says none (bad input: it must change
    nothing -- an unreadable message taken as "not offline" would cancel a dead gateway's last will)."""
    try:
        doc = json.loads(payload)
    except ValueError as exc:  # UnicodeDecodeError included
        return f"not JSON ({exc})"
    if not isinstance(doc, dict):
        return f"not a JSON object (got {type(doc).__name__})"
    state = doc.get("state")
    if state not in STATES:
        return f"state {state!r} is neither 'online' nor 'offline'"
    reason, boot = doc.get("reason"), doc.get("boot")
    return Status(state, None if reason is None else str(reason), None if boot is None else str(boot))


@dataclass
class _Seen:
    state: str | None = None
    boot: str | None = None
    onlines: deque[tuple[float, str | None]] = field(default_factory=deque)  # (arrival, boot) in the window
    flapping: bool = False
    duplicated: bool = False


class GatewayPresence:
    """Per-gateway status bookkeeping (module docstring). Thread-safe only under the caller's lock.

    Args:
        window_s: real seconds over which online announcements are counted.
        flap_after: online announcements within ``window_s`` that make a gateway flapping (>= 2).
        monotonic: the real-time source.
    """

    def __init__(self, window_s: float = DEFAULT_WINDOW_S, flap_after: int = DEFAULT_FLAP_AFTER,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        if window_s <= 0 or flap_after < 2:
            raise ValueError("window_s must be > 0 and flap_after >= 2")
        self.window_s = window_s
        self.flap_after = flap_after
        self.monotonic = monotonic
        self._seen: dict[tuple[str, str], _Seen] = {}

    def observe(self, site: str, gateway: str, state: str, boot: str | None, retained: bool) -> tuple[int, str]:
        """The log level and message for one status message of ``site``/``gateway``."""
        now = self.monotonic()
        seen = self._seen.setdefault((site, gateway), _Seen())
        changed = state != seen.state or (boot is not None and boot != seen.boot)
        restarted = state == "online" and seen.boot is not None and boot is not None and boot != seen.boot
        if state == "online" and not retained:
            seen.onlines.append((now, boot))
        while seen.onlines and now - seen.onlines[0][0] > self.window_s:
            seen.onlines.popleft()
        previous_boot = seen.boot
        seen.state = state
        seen.boot = boot if boot is not None else seen.boot
        who = f"{site}: gateway {gateway}"
        if retained:
            level = logging.INFO if changed else logging.DEBUG
            return level, (f"{who} status {state} (retained: last known state, not proof it is alive; a silent "
                           "rain gauge still opens a data gap)")
        boots = [b for _, b in seen.onlines if b is not None]
        runs = [b for i, b in enumerate(boots) if i == 0 or b != boots[i - 1]]  # A, B, B, A -> A, B, A
        alternating = len(runs) > len(set(runs))  # a boot came back after another one: two processes
        if alternating and not seen.duplicated:
            seen.duplicated = seen.flapping = True
            return logging.ERROR, (
                f"{who}: two gateways publish under one gateway id (boots {runs[-2]} and {runs[-1]} alternate, "
                f"{len(boots)} connects in {self.window_s:.0f} s); their readings arrive under both boots. Give each "
                "gateway its own id (`stormwatch gateway --check` with every site file finds them); further status "
                "changes at DEBUG")
        if len(seen.onlines) >= self.flap_after and not seen.flapping:
            seen.flapping = True
            return logging.WARNING, (f"{who} connected {len(seen.onlines)} times in {self.window_s:.0f} s "
                                     "(flapping connection); further status changes at DEBUG until it settles")
        if seen.flapping and len(seen.onlines) <= 1 and len(set(boots)) <= 1:
            seen.flapping = seen.duplicated = False  # quiet for a window: back to normal reporting
        if seen.flapping:
            return logging.DEBUG, f"{who} is {state} (boot {boot})"
        if restarted:
            return logging.INFO, f"{who} is {state} (restarted: boot {boot}, was {previous_boot})"
        if not changed:
            return logging.DEBUG, f"{who} is {state} again (boot {boot})"
        return logging.INFO, f"{who} is {state}"
