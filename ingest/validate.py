"""Validation of one MQTT readings message against the configured sites and device profiles.

The design: docs/ingest.md ("The modules", `ingest/validate.py`).
"""

from __future__ import annotations

import bisect
import logging
import threading
from collections import OrderedDict
from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Literal

from stormwatch import topics
from stormwatch.clock import Clock
from stormwatch.config import SiteConfig
from stormwatch.contract import (
    MANUAL_GATEWAY,
    MANUAL_QUANTITIES,
    RAIN_TIPS,
    PayloadError,
    Reading,
    parse_parts,
)
from stormwatch.display import names
from stormwatch.fastwire import Wire, fast_readings, fast_wires
from stormwatch.physics import impossible_value, plausible_range, rain_verdict
from stormwatch.profiles import ProfileLibrary
from stormwatch.stores.base import Conflict, DeadLetter
from stormwatch.stores.lineprotocol import Fields, from_ns, time_ns
from stormwatch.timebounds import DEFAULT_MAX_AGE_S, DEFAULT_MAX_FUTURE_S, TimeBounds
from stormwatch.tipsizes import TipSizes

log = logging.getLogger(__name__)

#: Quantities a gateway derives from a level sensor (profile with a ``level`` section) in addition
#: to the profile's own points: height of water / sediment above the basin floor, in metres
#: (stormwatch/contract.py quantity table).
LEVEL_QUANTITIES: Mapping[str, str] = {"stage": "m", "sediment_depth": "m"}

__all__ = ["DEFAULT_MAX_AGE_S", "DEFAULT_MAX_FUTURE_S", "ValidationResult", "Validator"]

#: Event times of rain readings remembered per device to judge the next one's rate (a day of
#: 1-minute polls, and a late reading a day behind still finds its predecessor).
RAIN_TIMES_KEPT = 1440
#: The counter flag of a sample awaiting confirmation: rain at its time unknown, not coverage
#: (:data:`stormwatch.gateway.counter.FLAG_SUSPECT`; the storm rule skips such readings too).
_SUSPECT = "counter_suspect"


@dataclass
class ValidationResult:
    """What became of one message.

    Attributes:
        accepted: readings to store as live.
        late: readings to store flagged ``late`` (retained, or older than ``late_after_s``).
        duplicates: readings whose identity was already stored (count them; do not store again).
        dead: dead letters, one per rejected reading (or one for an unparseable message).
        refused: the identities ``(gateway, boot, seq)`` of the readings among ``dead`` that parsed
            (refused for what they say, not for their form): once the dead letters are stored, they
            are handled, and ingest confirms them to the gateway like stored readings
            (:mod:`stormwatch.storedack`).
    """

    accepted: list[Reading] = field(default_factory=list)
    late: list[Reading] = field(default_factory=list)
    duplicates: list[Reading] = field(default_factory=list)
    dead: list[DeadLetter] = field(default_factory=list)
    refused: list[tuple[str, str, int]] = field(default_factory=list)


class Validator:
    """Checks readings messages against sites and device profiles.

    Args:
        sites: site id -> configuration.
        profiles: the device profile library (``device_profiles/``).
        clock: the time base for ``future_time``, lateness and ``received_at``.
        max_future_s: how far ahead of the clock an event time may be (gateway clock skew; the
            bound the alert engine applies too, :class:`stormwatch.timebounds.TimeBounds`).
        max_age_s: how far behind the clock an event time may be before it is ``implausible_time``
            (a gateway clock that lies); ``None`` = no bound (imports of historical files).
        late_after_s: readings older than this on arrival are stored as late. Default ``None``: only
            retained messages are late (failure-kinds.md #10). An age limit is opt-in because a
            gateway replaying its outbox after an outage delivers old readings that are real data
            the alert engine must still evaluate (it reports them with ``late_detection_s``).
        dedupe_size: how many committed identities the duplicate LRU remembers.
        fast: take a message whose readings all pass through the fast parser
            (:mod:`stormwatch.fastwire`; the same verdicts, tests/ingest/test_fastwire.py); ``False``: every
            message through :func:`~stormwatch.contract.parse_parts` (the differential tests).

    Raises:
        ProfileError: a device's profile cannot be loaded.
    """

    def __init__(
        self,
        sites: Mapping[str, SiteConfig],
        profiles: ProfileLibrary,
        clock: Clock,
        max_future_s: float = DEFAULT_MAX_FUTURE_S,
        max_age_s: float | None = DEFAULT_MAX_AGE_S,
        late_after_s: float | None = None,
        dedupe_size: int = 100_000,
        fast: bool = True,
    ) -> None:
        self.sites = dict(sites)
        self.fast = fast
        self.clock = clock
        self.bounds = TimeBounds(max_future_s, max_age_s)
        self.late_after = None if late_after_s is None else timedelta(seconds=late_after_s)
        self.dedupe_size = dedupe_size
        # identity -> (hash of its measurement, value, unit, time in ns): a duplicate says the same, a conflict not
        self._seen: OrderedDict[tuple[str, str, int], tuple[int, int | float, str, int]] = OrderedDict()
        # validate() (ingest: paho's network thread) and committed() (the store-writing thread) share _seen.
        self._seen_lock = threading.Lock()
        self.profiles = profiles
        # (site, device) -> quantity -> unit, resolved once (fails fast on a bad profile).
        self._units: dict[tuple[str, str], dict[str, str]] = self._units_of(self.sites)
        # (site, device) -> the tip sizes of a tip-counting device
        self._sizes: dict[tuple[str, str], TipSizes] = self._sizes_of(self.sites)
        # (site, device) -> sorted event times of its latest rain readings (rate judgement)
        self._rain_times: dict[tuple[str, str], list[datetime]] = {}
        self._rain_lock = threading.Lock()
        self._ranges: dict[str, tuple[float, float]] = {}  # quantity -> its plausible range (physics)
        #: rain readings stored with the site file's tip size because they named none, per (site, device)
        self.stamped: dict[tuple[str, str], int] = {}
        # (site, gateway, device, quantity, unit) the configuration accepts: checked once per series,
        # not per reading (replaced, not cleared, by set_sites; read before the tables it caches)
        self._known: set[tuple[str, str, str, str, str]] = set()
        self._topics: dict[str, tuple[str, str] | None] = {}  # topic -> (site, gateway) of a readings topic
        # (receive time, latest, earliest plausible event time) of the last message checked
        self._bounds_at: tuple[datetime | None, datetime, datetime | None] = (None, clock.now(), None)
        # the same in ns, for :meth:`plain`
        self._ns_at: tuple[datetime | None, int, int] = (None, 0, 0)

    def _units_of(self, sites: Mapping[str, SiteConfig]) -> dict[tuple[str, str], dict[str, str]]:
        units_by_device: dict[tuple[str, str], dict[str, str]] = {}
        for site_id, cfg in sites.items():
            for dev in cfg.devices:
                profile = self.profiles.get(dev.profile)
                units = dict(profile.quantities())
                if profile.level is not None:
                    units.update(LEVEL_QUANTITIES)
                units_by_device[(site_id, dev.id)] = units
        return units_by_device

    def _sizes_of(self, sites: Mapping[str, SiteConfig]) -> dict[tuple[str, str], TipSizes]:
        out: dict[tuple[str, str], TipSizes] = {}
        for site_id, cfg in sites.items():
            for dev in cfg.devices:
                sizes = TipSizes.of(cfg, self.profiles, dev.id)
                if sizes is not None:
                    out[(site_id, dev.id)] = sizes
        return out

    def set_sites(self, sites: Mapping[str, SiteConfig]) -> None:
        """Validate against ``sites`` from now on (``--sites DIR``: a site file added, changed or removed).

        Safe while another thread validates: the new tables are built first, then swapped in.

        Raises:
            ProfileError: a device's profile cannot be loaded (nothing is changed then).
        """
        units = self._units_of(sites)
        sizes = self._sizes_of(sites)
        self._units = units  # first: a reading of a site being added finds its devices once the site is there
        self._sizes = sizes
        self.sites = dict(sites)
        self._known = set()

    @classmethod
    def for_sites(cls, sites: Iterable[SiteConfig], profiles: ProfileLibrary, clock: Clock,
                  **kwargs: float | int | None) -> Validator:
        """Build from a list of site configurations (ids must be unique).

        Raises:
            ValueError: two configurations share a site id.
            ProfileError: a device's profile cannot be loaded.
        """
        by_id: dict[str, SiteConfig] = {}
        for cfg in sites:
            if cfg.site.id in by_id:
                raise ValueError(f"site id {cfg.site.id!r} configured twice")
            by_id[cfg.site.id] = cfg
        return cls(by_id, profiles, clock, **kwargs)  # type: ignore[arg-type]

    def validate(self, topic: str, payload: bytes, *, retained: bool = False,
                 received_at: datetime | None = None) -> ValidationResult:
        """Validate one message.

        Args:
            topic: the MQTT topic it arrived on.
            payload: the payload bytes.
            retained: the broker flagged it retained (stale by definition) -> ``late``.
            received_at: receive time; default ``clock.now()``.

        Returns:
            The typed outcome; never raises for bad input.
        """
        now = received_at or self.clock.now()
        where = self._topic(topic)
        if where is not None and self.fast:
            fast = fast_readings(payload)
            if fast is not None:
                # the fast path takes a message whose readings all pass; any refusal is the full path's
                done = self._all_settled(fast[0], fast[1], where, topic, payload, retained, now)
                if done is not None:
                    return done
        return self._full(topic, payload, where, retained, now)

    def plain(self, topic: str, payload: bytes, *, retained: bool = False, received_at: datetime | None = None,
              pending: Container[tuple[str, str, int]] = frozenset()) -> tuple[list[Wire], list[int]] | None:
        """The decoded readings and their event times in ns (:func:`stormwatch.fastwire.fast_wires`) of a
        message :meth:`validate` would accept whole as they are -- each reading of a series checked
        before, in its plausible range and the clock's bounds, on its own topic, no tip size, not rain,
        its identity not remembered nor among ``pending`` (a write in flight), the message not retained
        nor late -- else ``None``: the caller then takes :meth:`validate`, which gives the rest their
        verdicts. No object per reading."""
        where = self._topic(topic)
        if where is None or not self.fast or retained or self.late_after is not None:
            return None
        fast = fast_wires(payload)
        if fast is None:
            return None
        wires, stamps, _ = fast
        now = received_at or self.clock.now()
        at = self._ns_at
        if at[0] is not now:  # a batch's messages share their receive time
            earliest = self.bounds.earliest(now)
            at = self._ns_at = (now, time_ns(self.bounds.latest(now)), -(1 << 80) if earliest is None
                                else time_ns(earliest))
        _, latest, first = at
        if max(stamps) > latest or min(stamps) < first:
            return None
        topic_site, topic_gateway = where
        known, ranges, rain = self._known, self._ranges, RAIN_TIPS
        seen = self._seen
        for w in wires:
            gateway, quantity = w.gateway, w.quantity
            span = ranges.get(quantity)
            if (w.site != topic_site or gateway != topic_gateway or quantity == rain or w.tip_size is not None
                    or span is None or not span[0] <= w.value <= span[1]
                    or (topic_site, gateway, w.device, quantity, w.unit) not in known
                    or (identity := (gateway, w.boot, w.seq)) in seen or identity in pending):
                return None
        return wires, stamps

    def _full(self, topic: str, payload: bytes, where: tuple[str, str] | None, retained: bool,
              now: datetime) -> ValidationResult:
        """Every reading of a message through the contract's parser and :meth:`_check`, each refusal
        with its reason."""
        result = ValidationResult()

        def reject(reason: str, detail: str, body: bytes = payload) -> None:
            result.dead.append(DeadLetter(reason=reason, detail=detail, topic=topic, payload=body, received_at=now))

        if where is None:
            reject("bad_topic", f"{topic!r} is not a readings topic ({topics.READINGS_FILTER})")
            return result
        topic_site, topic_gateway = where
        try:
            parts = parse_parts(payload)
        except PayloadError as exc:
            reject(exc.reason, exc.detail)
            return result
        for part in parts:
            # each reading of a batch on its own: a bad one is dead-lettered with its index, the rest kept
            body = part.body if part.batched else payload
            prefix = f"readings.{part.index}: " if part.batched else ""
            if part.error is not None:
                reject(part.error.reason, prefix + part.error.detail, body)
                continue
            reading = part.reading
            assert reading is not None
            problem = self._check(reading, topic_site, topic_gateway, now)
            if problem is not None:
                reject(problem[0], prefix + problem[1], body)
                result.refused.append(reading.identity)
                continue
            self._settle(result, reading, part.index if part.batched else None, topic, payload, retained, now,
                         body)
        return result

    def _all_settled(self, readings: list[Reading], batched: bool, where: tuple[str, str], topic: str,
                     payload: bytes, retained: bool, now: datetime) -> ValidationResult | None:
        """The outcome of a message whose every reading passes :meth:`_check`, or ``None`` when one does
        not (the full path then refuses it with its reason). A reading of a series checked before, in
        its plausible range and time bounds, without a tip size, passes without the call: what
        :meth:`_check` would find of it (one pass, no object but the result)."""
        topic_site, topic_gateway = where
        known, ranges, check = self._known, self._ranges, self._check
        at = self._bounds_at
        if at[0] is not now:  # a batch's messages share their receive time
            at = self._bounds_at = (now, self.bounds.latest(now), self.bounds.earliest(now))
        _, latest, earliest = at
        result = ValidationResult()
        accept = result.accepted.append
        seen = self._seen
        plain = not retained and self.late_after is None
        settle = False  # a reading _settle decides: the message's readings again, in their order
        for r in readings:
            f = r.__dict__  # a model's fields: one lookup each, not the model's attribute protocol
            site, gateway, quantity = f["site"], f["gateway"], f["quantity"]
            span = ranges.get(quantity)
            t = f["time"]
            if (site != topic_site or gateway != topic_gateway or f["tip_size"] is not None or span is None
                    or not span[0] <= f["value"] <= span[1] or t > latest or (earliest is not None and t < earliest)
                    or (site, gateway, f["device"], quantity, f["unit"]) not in known):
                if check(r, topic_site, topic_gateway, now) is not None:
                    return None
            if (plain and (gateway, f["boot"], f["seq"]) not in seen
                    and (quantity != RAIN_TIPS or gateway == MANUAL_GATEWAY)):
                accept(r)  # what _settle decides for it, without the call
            else:
                settle = True
        if settle:
            result = ValidationResult()
            for index, r in enumerate(readings):
                if (plain and (r.gateway, r.boot, r.seq) not in seen
                        and (r.quantity != RAIN_TIPS or r.gateway == MANUAL_GATEWAY)):
                    result.accepted.append(r)
                else:
                    self._settle(result, r, index if batched else None, topic, payload, retained, now)
        return result

    def _topic(self, topic: str) -> tuple[str, str] | None:
        where = self._topics.get(topic, ())
        if where == ():
            if len(self._topics) > 100_000:  # topics of unknown gateways must not grow it forever
                self._topics.clear()
            where = self._topics[topic] = topics.parse_readings_topic(topic)
        return where  # type: ignore[return-value]

    def _settle(self, result: ValidationResult, reading: Reading, index: int | None, topic: str, payload: bytes,
                retained: bool, now: datetime, body: bytes | None = None) -> None:
        """A reading that passed the checks: described (rain), then a duplicate, a conflict, late or
        accepted. ``index``: its place in a batch (``None``: the message is the reading); ``body``: its
        own JSON for a dead letter (made from ``payload`` when needed)."""
        if reading.quantity == RAIN_TIPS and reading.gateway != MANUAL_GATEWAY:
            reading = self._describe(reading)
        seen = self._seen_again(reading)
        if seen is True:
            result.duplicates.append(reading)
        elif isinstance(seen, tuple):  # the identity was stored with another measurement
            if index is None:
                prefix, body = "", payload
            else:
                prefix = f"readings.{index}: "
                body = body if body is not None else parse_parts(payload)[index].body
            result.dead.append(DeadLetter(reason="conflicting_value", detail=prefix + Conflict(reading, *seen).detail(),
                                          topic=topic, payload=body, received_at=now))
            result.refused.append(reading.identity)  # durably dead-lettered: handled, confirmed
        elif retained or (self.late_after is not None and reading.time < now - self.late_after):
            result.late.append(reading)
        else:
            result.accepted.append(reading)

    def _check(self, r: Reading, topic_site: str, topic_gateway: str, now: datetime) -> tuple[str, str] | None:
        if r.site != topic_site or r.gateway != topic_gateway:
            return ("topic_mismatch", f"reading says site {r.site!r} gateway {r.gateway!r} but the topic says "
                                      f"site {topic_site!r} gateway {topic_gateway!r}")
        known = self._known
        series = (r.site, r.gateway, r.device, r.quantity, r.unit)
        if series not in known:
            cfg = self.sites.get(r.site)
            if cfg is None:
                return ("unknown_site", f"site {r.site!r} is not configured (known: {names(self.sites)})")
            if r.gateway == MANUAL_GATEWAY:
                problem = self._check_manual(r, cfg)
                if problem is not None:
                    return problem
                return self._check_time(r, now)
            problem = self._check_series(r, cfg)
            if problem is not None:
                return problem
            if len(known) < 100_000:
                known.add(series)
        if r.tip_size is not None:
            sizes = self._sizes.get((r.site, r.device))
            if sizes is not None and r.tip_size != sizes.text_at(r.time):
                return ("tip_size_mismatch", f"{r.device}: the reading's tips are {r.tip_size}, but the site file "
                                             f"gives the gauge {sizes.text_at(r.time)} at {r.time.isoformat()} "
                                             f"({sizes.source_at(r.time)}); record a gauge replacement under the "
                                             "device's replaced_gauges, or correct the profile (docs/ingest.md)")
        low, high = self._range(r.quantity)
        if not low <= r.value <= high:  # outside: physics says why (or, for a NaN, that it is not)
            impossible = impossible_value(r.quantity, r.value)
            if impossible is not None:
                return ("impossible_value", f"{r.device}: {impossible}")
        return self._check_time(r, now)

    def _check_series(self, r: Reading, cfg: SiteConfig) -> tuple[str, str] | None:
        """What the site's configuration says of a reading's gateway, device, quantity and unit."""
        if r.gateway != cfg.gateway_id:
            return ("unknown_gateway", f"gateway {r.gateway!r} is not site {r.site!r}'s gateway {cfg.gateway_id!r}")
        units = self._units.get((r.site, r.device))
        if units is None:
            return ("unknown_device", f"device {r.device!r} is not configured for site {r.site!r} "
                                      f"(known: {names(d.id for d in cfg.devices)})")
        expected = units.get(r.quantity)
        if expected is None:
            return ("unknown_quantity", f"device {r.device!r} does not produce {r.quantity!r} "
                                        f"(it produces: {names(units)})")
        if r.unit != expected:
            return ("unit_mismatch", f"{r.device} {r.quantity} unit {r.unit!r}, profile says {expected!r}")
        return None

    def _range(self, quantity: str) -> tuple[float, float]:
        found = self._ranges.get(quantity)
        if found is None:
            found = self._ranges[quantity] = plausible_range(quantity)
        return found

    def _describe(self, r: Reading) -> Reading:
        """A valid rain reading as it is stored: with the site file's tip size when it names none
        (logged once per device), and flagged ``rain_beyond_envelope`` / ``rain_extreme_rate`` when its
        tips are that much rain since the device's previous rain reading (module docstring)."""
        key = (r.site, r.device)
        sizes = self._sizes.get(key)
        if sizes is None:
            return r
        update: dict[str, object] = {}
        size = sizes.at(r.time)
        if r.tip_size is None:
            update["tip_size"] = str(size)
            n = self.stamped.get(key, 0)
            if n == 0:
                log.warning("%s/%s: rain readings without a tip size (gateway %s of an earlier stormwatch, or its "
                            "outbox from before an upgrade) are stored with the site file's %s (%s)", r.site,
                            r.device, r.gateway, size, sizes.source_at(r.time))
            self.stamped[key] = n + 1
        if _SUSPECT not in r.flags:
            with self._rain_lock:
                times = self._rain_times.setdefault(key, [])
                i = bisect.bisect_left(times, r.time)
                previous = times[i - 1] if i else None
                if i == len(times) or times[i] != r.time:
                    times.insert(i, r.time)
                    if len(times) > 2 * RAIN_TIMES_KEPT:
                        del times[:RAIN_TIMES_KEPT]  # now and then, not on every reading
            if previous is not None and isinstance(r.value, int) and r.value > 0:
                verdict = rain_verdict(r.value, size.mm_float, (r.time - previous).total_seconds())
                if verdict is not None and verdict not in r.flags:
                    log.warning("%s/%s: %d tips at %s since the previous rain reading at %s: flagged %s", r.site,
                                r.device, r.value, r.time.isoformat(), previous.isoformat(), verdict)
                    update["flags"] = (*r.flags, verdict)
        return r.model_copy(update=update) if update else r

    def _check_manual(self, r: Reading, cfg: SiteConfig) -> tuple[str, str] | None:
        """A reading entered by hand: at one of the site's discharge points or devices, of a manual
        quantity in its unit (and the device's unit, if the device measures it too), inside the
        method's range, with the inspector's name in ``raw``."""
        points = {p.id for p in cfg.points}
        units = self._units.get((r.site, r.device))
        if units is None and r.device not in points:
            return ("unknown_device", f"{r.device!r} is neither a discharge point nor a device of site {r.site!r} "
                                      f"(points: {names(points)}; devices: {names(d.id for d in cfg.devices)})")
        spec = MANUAL_QUANTITIES.get(r.quantity)
        if spec is None:
            return ("unknown_quantity", f"{r.quantity!r} is not entered by hand (manual quantities: "
                                        f"{', '.join(sorted(MANUAL_QUANTITIES))})")
        if r.unit != spec.unit or (units is not None and units.get(r.quantity, r.unit) != r.unit):
            expected = units.get(r.quantity, spec.unit) if units is not None else spec.unit
            return ("unit_mismatch", f"manual {r.quantity} at {r.device} in {r.unit!r}, expected {expected!r}")
        if not spec.low <= r.value <= spec.high:
            return ("impossible_value", f"manual {r.quantity} {r.value:g} {r.unit} is outside {spec.low:g} .. "
                                        f"{spec.high:g} ({spec.method})")
        if not isinstance(r.raw, str) or not r.raw.strip():
            return ("schema", "a manual reading names its inspector in raw")
        return None

    def _check_time(self, r: Reading, now: datetime) -> tuple[str, str] | None:
        return self.bounds.check(r.time, now)

    def _seen_again(self, reading: Reading) -> Literal[True] | tuple[int | float, str, datetime] | None:
        """``None``: identity not remembered; ``True``: remembered with the same measurement (a
        duplicate); else ``(value, unit, time)`` it was stored with (a conflict)."""
        identity = (reading.gateway, reading.boot, reading.seq)
        if identity not in self._seen:  # the common case, without the lock (a dict lookup is atomic)
            return None
        with self._seen_lock:
            held = self._seen.get(identity)
            if held is None:
                return None
            self._seen.move_to_end(identity)
        r = reading
        if held[0] == hash((r.site, r.device, r.quantity, r.unit, time_ns(r.time), r.value)):
            return True
        return (held[1], held[2], from_ns(held[3]))

    def committed(self, readings: Iterable[Reading]) -> None:
        """Remember identities the store has durably written with what they say (call after a successful
        write with the readings the store holds as they are -- not its conflicts; thread-safe)."""
        seen = self._seen
        with self._seen_lock:
            for r in readings:
                f = r.__dict__  # a model's fields: one lookup each, not the model's attribute protocol
                identity = (f["gateway"], f["boot"], f["seq"])
                if identity in seen:
                    seen.move_to_end(identity)
                unit, ns, value = f["unit"], time_ns(f["time"]), f["value"]
                seen[identity] = (hash((f["site"], f["device"], f["quantity"], unit, ns, value)), value, unit, ns)
            self._forget()

    def committed_wires(self, wires: Iterable[Fields], stamps: Iterable[int]) -> None:
        """:meth:`committed` of readings in any form with their fields (the wire form of :meth:`plain`, or
        a ``Reading``) and their times in ns."""
        seen = self._seen
        with self._seen_lock:
            for w, ns in zip(wires, stamps, strict=True):
                identity = (w.gateway, w.boot, w.seq)
                if identity in seen:
                    seen.move_to_end(identity)
                unit, value = w.unit, w.value
                seen[identity] = (hash((w.site, w.device, w.quantity, unit, ns, value)), value, unit, ns)
            self._forget()

    def _forget(self) -> None:
        seen = self._seen
        while len(seen) > self.dedupe_size:
            seen.popitem(last=False)
