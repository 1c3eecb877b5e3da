"""One simulated gateway of the fleet: the devices' values as the gateway would decode them, and its readings.

The design: docs/simulators.md ("The modules", `simulators/fleetgateway.py`).
"""

from __future__ import annotations

import logging
import re
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from stormwatch.codec import encode_point
from stormwatch.config import SiteConfig, device_profiles
from stormwatch.gateway.drivers import PointValue
from stormwatch.gateway.drivers.modbus import decode_block as decode_modbus_block
from stormwatch.gateway.drivers.modbus import plan_reads
from stormwatch.gateway.drivers.serial_line import line_values
from stormwatch.gateway.errors import DeviceError, NoDataError
from stormwatch.gateway.health import DeviceHealth
from stormwatch.gateway.plan import DevicePlan, ProfilePlan, compile_plan
from stormwatch.gateway.readings import DeviceReadings
from stormwatch.profiles import ProfileLibrary
from stormwatch.simulators.fleetsites import SiteStory
from stormwatch.simulators.scenario import SiteScenario
from stormwatch.simulators.serial_device import hrxl_line
from stormwatch.wire import WireReading

log = logging.getLogger(__name__)


class VirtualDevice:
    """A device and the gateway's driver in one: :meth:`poll` gives the point values of a poll at ``at``.

    Args:
        device: the device (compiled plan).
        profile: its profile (compiled plan).
        state: the site's physics.
        silent: event-time interval in which the device does not answer (a poll raises :class:`NoDataError`).

    Raises:
        ValueError: a profile this simulator does not model (SDI-12, a serial line other than a level sensor).
    """

    def __init__(self, device: DevicePlan, profile: ProfilePlan, state: SiteScenario,
                 silent: tuple[datetime, datetime] | None = None) -> None:
        self.device_id = device.id
        self.link_key = f"virtual://{device.id}"
        self.profile = profile
        self.state = state
        self.silent = silent
        self._blocks = plan_reads(profile.modbus.wire_points) if profile.modbus is not None else []
        self._pattern: re.Pattern[str] | None = None
        if profile.serial_line is not None:
            if profile.level is None or profile.level.kind != "distance_down":
                raise ValueError(f"device {device.id!r}: the fleet simulator models serial lines of distance-down "
                                 f"level sensors only, not {profile.model!r}")
            self._pattern = re.compile(profile.serial_line.pattern)
        elif profile.modbus is None:
            raise ValueError(f"device {device.id!r}: the fleet simulator does not model {profile.protocol} "
                             f"devices ({profile.model!r})")

    def _value(self, quantity: str, at: datetime) -> float | None:
        try:
            return self.state.value(self.device_id, quantity, at)
        except KeyError:
            return None  # not simulated: its registers read 0 (as the Modbus simulator serves them)

    def poll(self, at: datetime) -> list[PointValue]:
        """The values the gateway decodes from this device at event time ``at``.

        Raises:
            NoDataError: the device is silent at ``at``.
            stormwatch.gateway.errors.BadDataError: a value the profile cannot carry.
        """
        if self.silent is not None and self.silent[0] <= at < self.silent[1]:
            raise NoDataError(self.device_id, "no answer (simulated silence)")
        if self._pattern is not None:
            assert self.profile.serial_line is not None and self.profile.level is not None
            distance = self._value(self.profile.level.quantity, at)
            line = hrxl_line(distance).decode("ascii").rstrip("\r")
            return line_values(self.device_id, self.profile.serial_line, self._pattern, line)
        values: list[PointValue] = []
        for block in self._blocks:
            words: list[int] = []
            for point in block.points:
                value = self._value(point.quantity, at)
                words += [0] * point.count if value is None else encode_point(point, value)
            values += decode_modbus_block(self.device_id, block, words)
        return values


@dataclass
class _Device:
    virtual: VirtualDevice
    readings: DeviceReadings
    health: DeviceHealth
    interval: timedelta
    next_slot: int = 0


class FleetGateway:
    """The gateway of one fleet site: polls its virtual devices on the gateway's grid and makes readings.

    Args:
        cfg: the site.
        profiles: the profile library.
        story: what happens at the site.
        anchor: the poll grid's origin (the run's start; the gateway's ``sim_start`` anchor).

    Attributes:
        site, gateway_id, boot: the identity of its readings (``boot`` a new uuid per run).
        readings_made: readings made so far.

    Raises:
        ValueError: a device the fleet does not model, or a rain gauge without a counter.
    """

    def __init__(self, cfg: SiteConfig, profiles: ProfileLibrary, story: SiteStory, anchor: datetime) -> None:
        plan = compile_plan(cfg, profiles)
        self.site = plan.site
        self.gateway_id = plan.gateway_id
        self.boot = uuid.uuid4().hex
        self.story = story
        self.anchor = anchor
        self.readings_made = 0
        self._seq = 0
        state = SiteScenario(story.scenario, cfg, device_profiles(cfg, profiles))
        self._devices: list[_Device] = []
        for device in plan.devices:
            profile = plan.profile(device)
            silent = story.silent if device.id == cfg.rain_gauge else None
            self._devices.append(_Device(VirtualDevice(device, profile, state, silent),
                                         DeviceReadings(device.id, profile, device.poll_interval_s),
                                         DeviceHealth(f"{self.site}/{device.id}"),
                                         timedelta(seconds=device.poll_interval_s)))

    def next_poll(self) -> datetime:
        """The event time of the next slot any device is due at."""
        return min(self.anchor + d.next_slot * d.interval for d in self._devices)

    def poll(self, at: datetime) -> list[WireReading]:
        """Poll every device due at or before ``at`` (each at its slot time) and return the readings.

        A failed poll skips slots as the gateway does (:class:`stormwatch.gateway.health.DeviceHealth`);
        a slot that is already past when polled is polled at its own time (nothing is skipped by a
        slow simulator: the fleet is deterministic).
        """
        out: list[WireReading] = []
        for d in self._devices:
            while (slot_time := self.anchor + d.next_slot * d.interval) <= at:
                skip = 0
                try:
                    values = d.virtual.poll(slot_time)
                except DeviceError as exc:
                    skip = d.health.failed(exc)
                else:
                    d.health.succeeded()
                    pending, state = d.readings.readings(values, slot_time)
                    d.readings.advanced(state)
                    for quantity, value, unit, raw, flags, tip_size in pending:
                        out.append(WireReading(self.site, d.virtual.device_id, quantity, value, unit, slot_time,
                                               self.gateway_id, self.boot, self._seq, raw, flags, tip_size))
                        self._seq += 1
                d.next_slot += 1 + skip
        self.readings_made += len(out)
        return out
