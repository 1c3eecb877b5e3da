"""The gateway service: poll → counter/QC → outbox (committed) → MQTT QoS 1 → confirmed stored → delete.

Scheduling: each device is polled on the grid ``anchor + k × poll_interval_s`` in CLOCK time
(``anchor`` = the scenario clock's ``sim_start``, else the Unix epoch, so wall-clock polls land on
round times; no slot before the anchor: a gateway started before ``sim_start`` waits for it) and
each reading is stamped with its grid instant, so event times are regular. A
poll that starts so late that a later slot is already due is moved to that latest due slot (the
skipped slots are gaps, counted in :attr:`Gateway.missed_slots`) -- but never past the last slot
before a run's ``until``: a run that ends (a simulation's end) always polls its final slot, so the
tips of the last interval are counted however loaded the machine is. One polling thread per link
(Modbus TCP endpoint, RS-485 line, serial port): a dead line never delays the others.

The design: docs/gateway.md ("The modules", `gateway/service.py`).
"""

from __future__ import annotations

import itertools
import logging
import math
import os
import sqlite3
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stormwatch.clock import Clock
from stormwatch.gateway.clockfloor import ClockFloor
from stormwatch.gateway.counter import CounterError, CounterState, CounterStore
from stormwatch.gateway.drivers import Driver, PointValue
from stormwatch.gateway.drivers.build import Links, build_driver
from stormwatch.gateway.drivers.modbus import ModbusLink
from stormwatch.gateway.errors import DeviceError
from stormwatch.gateway.health import DeviceHealth
from stormwatch.gateway.outbox import DEFAULT_MAX_AGE_S, DEFAULT_MAX_BYTES, DEFAULT_MAX_ROWS, Outbox
from stormwatch.gateway.plan import DevicePlan, GatewayPlan, ProfilePlan, compile_plan
from stormwatch.gateway.publisher import MqttPublisher
from stormwatch.gateway.readings import DeviceReadings, Pending
from stormwatch.gateway.schedule import PollTimer, poll_timers
from stormwatch.runtime.mqtt import parse_broker_url
from stormwatch.wire import WireReading

if TYPE_CHECKING:
    from stormwatch.config import SiteConfig
    from stormwatch.profiles import ProfileLibrary

log = logging.getLogger(__name__)

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
STATE_DB = "gateway.sqlite3"


@dataclass
class _Runner:
    """Schedule and state of one device within its link's polling thread."""

    device: DevicePlan
    profile: ProfilePlan
    driver: Driver
    health: DeviceHealth
    readings: DeviceReadings
    slot: int = 0
    at: datetime = EPOCH  # the time of ``slot`` (kept with it: the link thread picks the earliest)
    missed_logged: bool = False
    polls: int = field(default=0)


def _slot_of(r: _Runner) -> datetime:
    return r.at


#: One poll waiting for its instant's commit: the device, its slot time, its readings, its new counter state.
_Staged = tuple[_Runner, datetime, list[Pending], CounterState | None]


class Gateway:
    """The edge gateway of one site.

    Args:
        cfg: the validated site (devices, transports, gateway id); compiled with ``profiles`` into
            a :class:`stormwatch.gateway.plan.GatewayPlan` (see :meth:`from_plan` to start from a plan).
        profiles: device profiles.
        clock: event-time clock (WallClock in production, ScenarioClock in simulation).
        broker_url: ``mqtt://host:port`` or ``mqtts://host:port`` (credentials from the URL or
            ``STORMWATCH_MQTT_USERNAME``/``_PASSWORD``; see :mod:`stormwatch.runtime.mqtt`).
        state_dir: directory for ``gateway.sqlite3`` (outbox + counter baselines); created.
        anchor: grid origin for poll slots (default: ``clock.sim_start`` if the clock has one,
            else the Unix epoch).
        drain_timeout_s: real seconds :meth:`run` waits at the end for the outbox to empty (every reading
            confirmed).
        outbox_max_rows, outbox_max_bytes, outbox_max_age_s: outbox bounds and drop policy (see
            :mod:`stormwatch.gateway.outbox`).
        publish_window, max_publish_rate_per_s, reconnect_max_s, keepalive_s, batch, batch_gather_s, confirm,
            resend_grace_s, probe_after_s, confirm_alarm_s, takeover_max_s, takeover_settle_s: see
            :class:`MqttPublisher`
            (``batch``: one message per poll cycle instead of one per reading; ``confirm``: ``"stored"``
            or ``"broker"``).
        stats_interval_s: real seconds between the INFO counter lines.
        wake_on_commit: each commit of polls wakes the publisher; ``False``: whoever knows when an
            instant's polls are all committed wakes it (``gateway.publisher.wake``; a lockstep clock's
            :class:`~stormwatch.gateway.schedule.StoredParticipant`), so they go as one message.
        clock_floor: no reading is polled or stamped while the clock reads before this date/time
            (:mod:`stormwatch.gateway.clockfloor`); default: the build date for the wall clock, none
            for a scenario clock.

    Raises:
        stormwatch.gateway.drivers.build.UnsupportedDevice: a device the gateway cannot poll.
        profiles.ProfileError: a missing/invalid profile.
        stormwatch.gateway.plan.PlanError: a device whose readings would break the contract.
        stormwatch.runtime.mqtt.BrokerUrlError: a bad broker URL.
    """

    def __init__(
        self,
        cfg: SiteConfig,
        profiles: ProfileLibrary,
        clock: Clock,
        broker_url: str,
        state_dir: Path,
        **options: Any,
    ) -> None:
        self.cfg: SiteConfig | None = cfg
        self._setup(compile_plan(cfg, profiles), clock, broker_url, state_dir, **options)

    @classmethod
    def from_plan(cls, plan: GatewayPlan, clock: Clock, broker_url: str, state_dir: Path, **options: Any) -> Gateway:
        """A gateway running a compiled plan (no pydantic involved); ``options`` as for :class:`Gateway`.

        Raises:
            stormwatch.gateway.drivers.build.UnsupportedDevice, stormwatch.gateway.plan.PlanError,
            stormwatch.runtime.mqtt.BrokerUrlError: as for :class:`Gateway`.
        """
        gw = cls.__new__(cls)
        gw.cfg = None
        gw._setup(plan, clock, broker_url, state_dir, **options)
        return gw

    def _setup(
        self,
        plan: GatewayPlan,
        clock: Clock,
        broker_url: str,
        state_dir: Path,
        *,
        anchor: datetime | None = None,
        drain_timeout_s: float = 10.0,
        outbox_max_rows: int = DEFAULT_MAX_ROWS,
        outbox_max_bytes: int = DEFAULT_MAX_BYTES,
        outbox_max_age_s: float | None = DEFAULT_MAX_AGE_S,
        publish_window: int = 200,
        max_publish_rate_per_s: float = 5000.0,
        reconnect_max_s: float = 10.0,
        clock_floor: date | datetime | None = None,
        keepalive_s: int = 30,
        batch: bool = False,
        batch_gather_s: float = 0.2,
        wake_on_commit: bool = True,
        confirm: str = "stored",
        resend_grace_s: float = 10.0,
        probe_after_s: float = 30.0,
        confirm_alarm_s: float = 900.0,
        stats_interval_s: float = 60.0,
        takeover_max_s: float = 300.0,
        takeover_settle_s: float = 60.0,
    ) -> None:
        self.plan = plan
        self.clock = clock
        self.site = plan.site
        self.gateway_id = plan.gateway_id
        self.boot = uuid.uuid4().hex
        self.drain_timeout_s = drain_timeout_s
        self.anchor = anchor or getattr(clock, "sim_start", None) or EPOCH
        self.clock_floor = ClockFloor.for_clock(clock, clock_floor)
        state_dir = Path(state_dir)
        state_dir.mkdir(parents=True, exist_ok=True)
        broker = parse_broker_url(broker_url, os.environ)
        self._links: Links = {}
        self._runners: list[_Runner] = []
        for device in plan.devices:
            profile = plan.profile(device)
            driver = build_driver(device, profile, clock, self._links)
            self._runners.append(_Runner(device, profile, driver, DeviceHealth(device.id),
                                         DeviceReadings(device.id, profile, device.poll_interval_s)))
        self.outbox = Outbox(
            state_dir / STATE_DB, max_rows=outbox_max_rows, max_bytes=outbox_max_bytes, max_age_s=outbox_max_age_s
        )
        counters = CounterStore(state_dir / STATE_DB)
        try:
            for r in self._runners:
                if r.profile.counter is not None:
                    r.readings.counter = baseline = counters.load(r.device.id)
                    if baseline is not None:
                        log.info("%s: counter baseline %d at %s (persisted)", r.device.id, baseline.value,
                                 baseline.time.isoformat())
        finally:
            counters.close()
        self.publisher = MqttPublisher(
            broker, self.site, self.gateway_id, self.boot, self.outbox, clock,
            window=publish_window, max_rate_per_s=max_publish_rate_per_s, reconnect_max_s=reconnect_max_s,
            keepalive_s=keepalive_s, batch=batch, batch_gather_s=batch_gather_s, confirm=confirm,
            resend_grace_s=resend_grace_s,
            probe_after_s=probe_after_s, confirm_alarm_s=confirm_alarm_s, takeover_max_s=takeover_max_s,
            takeover_settle_s=takeover_settle_s,
        )
        self.stats_interval_s = stats_interval_s
        self.wake_on_commit = wake_on_commit
        self._seq = itertools.count()
        self._seq_lock = threading.Lock()
        self._staged = threading.local()  # per link thread: the polls of this instant, not yet committed
        self._stop = threading.Event()
        self._running = threading.Event()
        self._finished = threading.Event()
        self._closed = False
        self.missed_slots = 0
        self.readings_made = 0

    # -- public API ---------------------------------------------------------------------------

    def run(self, until: datetime | None = None) -> None:
        """Poll until ``clock.now() >= until`` (or forever) or :meth:`stop`; then drain and close.

        Blocking. While the clock reads before the clock floor nothing is polled (one ERROR, one
        INFO when the clock is set; :mod:`stormwatch.gateway.clockfloor`). Slots at or after
        ``until`` are not polled. At the end waits up to ``drain_timeout_s`` (real time) for the
        outbox to empty, publishes a retained offline status and disconnects. Whatever is not
        confirmed stays in the outbox for the next run.
        """
        self._running.set()
        log.info(
            "gateway %s/%s boot %s: %d devices on %d links", self.site, self.gateway_id, self.boot,
            len(self._runners), len({r.driver.link_key for r in self._runners}),
        )
        try:
            self.publisher.start()  # the outbox of earlier runs is published even while the clock is wrong
            by_link: dict[str, list[_Runner]] = {}
            if self.clock_floor is None or self.clock_floor.wait(self.clock, self._stop):  # False: stopped
                for r in self._runners:
                    by_link.setdefault(r.driver.link_key, []).append(r)
            timers = poll_timers(self.clock, self._stop, by_link)
            threads = [
                threading.Thread(target=self._poll_link, args=(runners, until, timer), name=f"poll {key}",
                                 daemon=True)
                for (key, runners), timer in zip(by_link.items(), timers, strict=True)
            ]
            for t in threads:
                t.start()
            next_stats = time.monotonic() + self.stats_interval_s
            for t in threads:
                while t.is_alive():
                    t.join(max(0.0, next_stats - time.monotonic()))
                    if time.monotonic() >= next_stats:
                        self.log_stats()
                        next_stats = time.monotonic() + self.stats_interval_s
            self.publisher.wake()  # the last commits, also when they do not wake it themselves
            drained = self.publisher.wait_drained(self.drain_timeout_s)
            if not drained:
                log.warning("stopping with %d readings still in the outbox, not yet confirmed (sent again on the "
                            "next start)", self.outbox.depth())
        finally:
            self._close()
            self._finished.set()

    def log_stats(self, stopped: bool = False) -> None:
        """One INFO line: readings made, published (re-sent), confirmed; the outbox and how late it is."""
        pub = self.publisher
        log.info("gateway %s/%s%s: readings made=%d published=%d resent=%d confirmed=%d outbox=%d "
                 "oldest_unconfirmed_s=%.0f missed_slots=%d", self.site, self.gateway_id,
                 " stopped" if stopped else "", self.readings_made, pub.published_rows, pub.resent_rows,
                 pub.confirmed, self.outbox.depth(), pub.confirm_lag_s(), self.missed_slots)

    def stop(self, timeout_s: float | None = None) -> None:
        """Stop polling, wait for outstanding confirmations (up to ``drain_timeout_s``), disconnect.

        Safe from any thread; blocks until :meth:`run` has finished (at most
        ``drain_timeout_s + 10`` s by default). Without a running :meth:`run` it just closes.
        """
        self._stop.set()
        if self._running.is_set():
            self._finished.wait(timeout_s if timeout_s is not None else self.drain_timeout_s + 10.0)
        else:
            self._close()

    def health(self, device_id: str) -> DeviceHealth:
        """Failure counters of one device (``failures`` in a row, ``total_failures``).

        Raises:
            KeyError: unknown device.
        """
        for r in self._runners:
            if r.device.id == device_id:
                return r.health
        raise KeyError(device_id)

    def discarded_replies(self) -> dict[str, dict[str, int]]:
        """Modbus RTU replies discarded so far, by line (link key) and reason (``late_reply``,
        ``wrong_unit``, ``wrong_function``, ``wrong_byte_count``, ``wrong_length``;
        :mod:`stormwatch.gateway.drivers.rtu`). Lines without discards are left out."""
        return {key: dict(link.discarded) for key, link in self._links.items()
                if isinstance(link, ModbusLink) and link.discarded}

    def outbox_depth(self) -> int:
        """Readings committed and not yet confirmed (stored by ingest, or PUBACKed with ``confirm="broker"``)."""
        return self.outbox.depth()

    # -- internals ----------------------------------------------------------------------------

    def _close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self.publisher.close()
            self.log_stats(stopped=True)
        finally:
            for r in self._runners:
                try:
                    r.driver.close()
                except Exception as exc:  # closing must not hide the rest of the shutdown
                    log.warning("%s: close failed: %s", r.device.id, exc)
            self.outbox.close()

    def _slot_time(self, r: _Runner, k: int) -> datetime:
        return self.anchor + timedelta(seconds=k * r.device.poll_interval_s)

    def _set_slot(self, r: _Runner, k: int) -> None:
        r.slot, r.at = k, self._slot_time(r, k)

    def _slot_at_or_after(self, r: _Runner, t: datetime) -> int:
        return math.ceil((t - self.anchor).total_seconds() / r.device.poll_interval_s - 1e-9)

    def _latest_due_slot(self, r: _Runner, t: datetime) -> int:
        return math.floor((t - self.anchor).total_seconds() / r.device.poll_interval_s + 1e-9)

    def _poll_link(self, runners: list[_Runner], until: datetime | None, timer: PollTimer) -> None:
        timer.attach()
        try:
            self._poll_runners(runners, until, timer)
        finally:
            self._commit_staged()  # before the clock stops waiting for this thread
            timer.close()

    def _poll_runners(self, runners: list[_Runner], until: datetime | None, timer: PollTimer) -> None:
        now = self.clock.now()
        for r in runners:
            self._set_slot(r, max(0, self._slot_at_or_after(r, now)))  # nothing before the anchor (sim_start)
        active = list(runners)
        while active and not self._stop.is_set():
            r = min(active, key=_slot_of)
            at = r.at
            if until is not None and at >= until:
                active.remove(r)
                continue
            if at > self.clock.now():
                self._commit_staged()  # this instant's polls in one outbox transaction, before waiting
            if not timer.wait_until(at):
                return
            late = self._due_slot(r, until)
            if late > r.slot:  # a later slot is already due: poll for it (a reading never predates its read)
                self._skipped(r, late - r.slot)
                self._set_slot(r, late)
                at = r.at
            skip = self._poll(r, at)
            nxt = r.slot + 1 + skip
            due = self._due_slot(r, until)
            if due > nxt:
                self._skipped(r, due - nxt)
                nxt = due
            self._set_slot(r, nxt)

    def _due_slot(self, r: _Runner, until: datetime | None) -> int:
        """The latest slot already due now -- but never past the last slot before ``until``: however
        late, a run's final slot is still polled (its tips count)."""
        due = self._latest_due_slot(r, self.clock.now())
        if until is not None:
            due = min(due, self._slot_at_or_after(r, until) - 1)
        return due

    def _skipped(self, r: _Runner, n: int) -> None:
        self.missed_slots += n
        level = logging.DEBUG if r.missed_logged else logging.WARNING
        log.log(level, "%s: polling behind schedule, %d slot%s skipped (gaps)", r.device.id, n, "" if n == 1 else "s")
        r.missed_logged = True

    def _poll(self, r: _Runner, at: datetime) -> int:
        """Poll one device for slot time ``at``; returns the slots to skip (backoff)."""
        try:
            values = r.driver.poll()
        except DeviceError as exc:
            return r.health.failed(exc)
        except Exception as exc:  # a driver bug must not kill the link's thread
            log.exception("%s: unexpected error while polling", r.device.id)
            return r.health.failed(exc)
        r.health.succeeded()
        r.polls += 1
        try:
            self._stage(r, values, at)
        except CounterError as exc:
            log.error("%s: bad counter sample, no reading: %s", r.device.id, exc)
        return 0

    def _staged_polls(self) -> list[_Staged]:
        polls: list[_Staged] | None = getattr(self._staged, "polls", None)
        if polls is None:
            polls = self._staged.polls = []
        return polls

    def _stage(self, r: _Runner, values: list[PointValue], at: datetime) -> None:
        """The readings of one poll, kept until the link thread's poll instant is over (:meth:`_commit_staged`)."""
        staged = self._staged_polls()
        if any(s[0] is r for s in staged):  # this device again before a wait: its counter state goes first
            self._commit_staged()
        pending, new_state = r.readings.readings(values, at)
        if pending or new_state is not None:
            staged.append((r, at, pending, new_state))

    def _commit_staged(self) -> None:
        """Commit the polls this link thread staged in one outbox transaction, then hand them to the publisher.

        Identities are given here, under the lock the commit holds, so outbox order is ``seq`` order; a
        counter's state advances only once its reading is committed (a failed commit loses the readings
        of that instant, not their tips: the next poll counts from the old baseline).
        """
        staged = self._staged_polls()
        if not staged:
            return
        polls = list(staged)
        staged.clear()
        states = {r.device.id: state for r, _at, _pending, state in polls if state is not None}
        try:
            with self._seq_lock:
                readings = [
                    WireReading(
                        site=self.site, device=r.device.id, quantity=q, value=value, unit=unit, time=at,
                        gateway=self.gateway_id, boot=self.boot, seq=next(self._seq), raw=raw, flags=flags,
                        tip_size=tip_size,
                    )
                    for r, at, pending, _state in polls
                    for q, value, unit, raw, flags, tip_size in pending
                ]
                self.outbox.add(readings, states or None)
        except sqlite3.Error as exc:
            for r, at, _pending, _state in polls:
                log.error("%s: outbox commit failed, reading at %s lost: %s", r.device.id, at.isoformat(), exc)
            return
        for r, _at, _pending, state in polls:
            r.readings.advanced(state)
        self.readings_made += len(readings)
        if self.wake_on_commit:
            self.publisher.wake()
