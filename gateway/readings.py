"""One poll's decoded values → the readings a gateway publishes (counter → tips, QC flags, gaps).

The gateway service (:mod:`stormwatch.gateway.service`) and the fleet simulator
(:mod:`stormwatch.simulators.fleet`, the MQTT-level stand-in for many gateways) both turn a poll
into readings here, so both publish the same payloads for the same device values.

The design: docs/gateway.md ("The modules", `gateway/readings.py`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from stormwatch.gateway.counter import RAIN_QUANTITY, CounterState, count_tips
from stormwatch.gateway.qc import DEVICE_ERROR_QUANTITY, ValueHistory, check_value

if TYPE_CHECKING:
    from stormwatch.gateway.drivers import PointValue
    from stormwatch.gateway.plan import ProfilePlan

log = logging.getLogger("stormwatch.gateway.service")  # the gateway's log lines, as before the split

#: One reading before it has an identity: ``(quantity, value, unit, raw, flags, tip_size)`` (``tip_size``:
#: the depth of a tip, ``"0.01 in"``, on rain readings; ``None`` on every other).
Pending = tuple[str, int | float, str, list[int] | int | float | str, tuple[str, ...], str | None]


@dataclass
class DeviceReadings:
    """What a gateway remembers of one device between polls: its counter state and QC history.

    Attributes:
        device: the device id.
        profile: its compiled profile (:class:`stormwatch.gateway.plan.ProfilePlan`).
        poll_interval_s: its poll interval (a counter sample more than two intervals after the
            trusted one is a catch-up).
        counter: the counter's state (``None`` before its first sample; persisted by the gateway).
        history: quantity → recent values for the flatline/spike checks.
    """

    device: str
    profile: ProfilePlan
    poll_interval_s: float
    counter: CounterState | None = None
    history: dict[str, ValueHistory] = field(default_factory=dict)

    def readings(self, values: list[PointValue], at: datetime) -> tuple[list[Pending], CounterState | None]:
        """The readings of one poll at event time ``at`` and the counter state they advance to.

        The counter state is returned, not kept: the caller commits it together with the readings
        (the gateway's outbox transaction) and then calls :meth:`advanced`.

        Raises:
            stormwatch.gateway.counter.CounterError: a counter sample that is not a whole number in range.
        """
        dev = self.device
        device_error = False
        for v in values:
            if v.quantity == DEVICE_ERROR_QUANTITY and v.number != 0:
                device_error = True
                log.warning("%s: device reports error code %s at %s", dev, v.number, at.isoformat())
        counter_spec = self.profile.counter
        level = self.profile.level
        pending: list[Pending] = []
        new_state: CounterState | None = None
        for v in values:
            if v.quantity == DEVICE_ERROR_QUANTITY:
                continue
            if counter_spec is not None and v.quantity == counter_spec.quantity:
                result = count_tips(self.counter, v.number, at, counter_spec, self.poll_interval_s,
                                    gap_before=v.gap_before)
                if result.gap_start is not None:
                    log.warning("%s: counter reset at %s (read %s): rain since %s is unknown (a data gap), "
                                "%d tips since", dev, at.isoformat(), v.number, result.gap_start.isoformat(),
                                result.tips)
                elif result.flags:
                    log.info("%s: counter %s at %s: %d tips (%s)", dev, v.number, at.isoformat(), result.tips,
                             ",".join(result.flags))
                flags = result.flags + (("device_error",) if device_error else ())
                new_state = result.state
                pending.append((RAIN_QUANTITY, result.tips, counter_spec.unit, int(v.number), flags,
                                str(counter_spec.tip_resolution)))
                continue
            if level is not None and v.quantity == level.quantity and v.number in level.no_target:
                log.debug("%s: no target (raw %s) at %s: gap", dev, v.number, at.isoformat())
                continue
            verdict = check_value(v.value, v.number, v.valid_range, v.error_codes, device_error)
            if not verdict.publish:
                log.warning("%s: %s not published at %s: %s", dev, v.quantity, at.isoformat(), verdict.reason)
                continue
            history = self.history.setdefault(v.quantity, ValueHistory())
            pending.append((v.quantity, v.value, v.unit, v.raw, verdict.flags + history.check(v.value, v.qc), None))
        return pending, new_state

    def advanced(self, state: CounterState | None) -> None:
        """The readings of a poll were committed: keep the counter state they advanced to (if any)."""
        if state is not None:
            self.counter = state
