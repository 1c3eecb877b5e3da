"""Manual field readings: a transparency tube in cm, a grab sample's NTU and pH from hand meters.

An inspector enters what they measured at a discharge point (where stormwater leaves the site, the
place samples are taken: :func:`check_sample_place`) and when they sampled it (``stormwatch
readings add``, or the form on the web desk's site page). Each value becomes one
:class:`~stormwatch.contract.Reading` that says where it came from.

The design: docs/importing.md ("The modules", `importers/manual.py`).
"""

from __future__ import annotations

import hashlib
import logging
import math
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from stormwatch import topics
from stormwatch.clock import Clock
from stormwatch.config import LEGACY_POINT, SiteConfig
from stormwatch.contract import (
    MANUAL_GATEWAY,
    MANUAL_QUANTITIES,
    PERSON_NAME_MAX,
    Reading,
    check_person_name,
    dump_readings,
)
from stormwatch.display import amount, number
from stormwatch.errors import InputError
from stormwatch.importers.identity import import_seq
from stormwatch.ingest.validate import Validator
from stormwatch.profiles import ProfileLibrary
from stormwatch.runtime import mqttsession as session
from stormwatch.runtime.mqtt import BrokerSettings
from stormwatch.stores.base import Conflict, DeadLetter, ReadingStore

log = logging.getLogger(__name__)

#: Longest inspector name kept (the ``raw`` of a manual reading): the person-name grammar's.
INSPECTOR_MAX = PERSON_NAME_MAX


class ManualEntryError(InputError):
    """A manual entry that cannot be recorded (nothing was stored or sent); the message says why."""


class ManualValueError(ManualEntryError):
    """One value of a manual entry the method cannot give: not a finite number, or outside the
    method's range (:data:`stormwatch.contract.MANUAL_QUANTITIES`).

    Attributes:
        quantity: the manual quantity (``transparency``, ``turbidity``, ``ph``).
        value: the value given.
        reason: what is wrong with it, e.g. ``must be a finite number``.
    """

    def __init__(self, quantity: str, value: float, reason: str) -> None:
        self.quantity, self.value, self.reason = quantity, value, reason
        super().__init__(f"{quantity} {number(value)}: {reason}")


@dataclass(frozen=True)
class ManualEntry:
    """What an inspector measured at one place and time.

    Attributes:
        site: site id.
        point: discharge point id where the sample was taken (:func:`check_sample_place`).
        sampled_at: when it was taken (aware; stored in UTC).
        inspector: who took it.
        values: quantity -> value (``transparency`` cm, ``turbidity`` NTU, ``ph``).
    """

    site: str
    point: str
    sampled_at: datetime
    inspector: str
    values: Mapping[str, float]


def sample_places(cfg: SiteConfig) -> list[tuple[str, str]]:
    """Where a field sample of site ``cfg`` is taken: ``(id, label)`` of its discharge points, in
    the site file's order (a site file with one ``turbidity_pair``: that point, id
    :data:`~stormwatch.config.LEGACY_POINT`). Devices are not sampling places: a pH entered
    against the rain gauge is no sample of the discharge."""
    return [(p.id, "the site's discharge point (turbidity_pair)" if p.id == LEGACY_POINT else p.label)
            for p in cfg.points]


def check_sample_place(cfg: SiteConfig, point: str) -> None:
    """Refuse ``point`` unless it is one of the discharge points of site ``cfg`` (:func:`sample_places`).

    Raises:
        ManualEntryError: ``point`` is a device or unknown (the message lists the points), or the
            site has no discharge point at all.
    """
    places = [pid for pid, _ in sample_places(cfg)]
    if point in places:
        return
    site = cfg.site.id
    what = (f"{point!r} is a device of site {site!r}, not a discharge point"
            if any(d.id == point for d in cfg.devices) else f"{point!r} is not a discharge point of site {site!r}")
    if not places:
        raise ManualEntryError(f"{what}, and the site has no discharge point to sample (give it discharge_points or "
                               "a turbidity_pair)")
    raise ManualEntryError(f"{what}: samples are taken where stormwater leaves the site (its points: "
                           f"{', '.join(places)})")


def manual_boot(site: str, point: str, quantity: str, inspector: str) -> str:
    """The ``boot`` of one inspector's manual readings of one quantity at one point (stable)."""
    digest = hashlib.sha256("\x00".join((site, point, quantity, inspector)).encode("utf-8")).hexdigest()
    return f"manual-{digest[:16]}"


def manual_readings(entry: ManualEntry) -> list[Reading]:
    """The readings of ``entry``, one per value.

    Raises:
        ManualEntryError: no value, an unknown quantity, a blank or too long inspector name, a naive
            time, a value the schema refuses; :class:`ManualValueError` for a value that is not a
            finite number or outside the method's range.
    """
    if not entry.inspector.strip():
        raise ManualEntryError("the inspector's name is required (who took the sample)")
    try:
        name = check_person_name(entry.inspector, "the inspector's name")
    except ValueError as exc:
        raise ManualEntryError(str(exc)) from None
    if not entry.values:
        raise ManualEntryError("nothing to record: give at least one of "
                               + ", ".join(f"{q} ({s.unit})" for q, s in MANUAL_QUANTITIES.items()))
    if entry.sampled_at.tzinfo is None:
        raise ManualEntryError("the sampling time needs a time zone")
    out = []
    for quantity, value in entry.values.items():
        spec = MANUAL_QUANTITIES.get(quantity)
        if spec is None:
            raise ManualEntryError(f"{quantity!r} is not a manual quantity ({', '.join(MANUAL_QUANTITIES)})")
        if not math.isfinite(value):
            raise ManualValueError(quantity, value, f"must be a finite number ({spec.low:g} to {spec.high:g})")
        if not spec.low <= value <= spec.high:
            raise ManualValueError(quantity, value,
                                   f"outside {spec.low:g} to {spec.high:g} {spec.unit} ({spec.method})")
        try:
            out.append(Reading(site=entry.site, device=entry.point, quantity=quantity, value=float(value),
                               unit=spec.unit, time=entry.sampled_at, gateway=MANUAL_GATEWAY,
                               boot=manual_boot(entry.site, entry.point, quantity, name),
                               seq=import_seq(entry.sampled_at), raw=name))
        except ValueError as exc:  # pydantic's ValidationError is a ValueError
            raise ManualEntryError(f"{quantity} {value!r}: {str(exc).splitlines()[-1].strip()}") from None
    return out


@dataclass(frozen=True)
class Recorded:
    """What became of a manual entry: ``stored`` new in the store, ``already`` stored before with the
    same value, ``conflicts`` refused because the sample is recorded with another value
    (``conflicting_value``; kept as it was), ``corrected`` ``(replaced, new)`` pairs of an explicit
    correction (``correct=True``), ``published`` to the broker (``None``: not sent)."""

    readings: tuple[Reading, ...]
    stored: int = 0
    already: int = 0
    published: str | None = None
    conflicts: tuple[Conflict, ...] = ()
    corrected: tuple[tuple[Reading, Reading], ...] = ()


def publish_once(broker: BrokerSettings, topic: str, payload: bytes, timeout_s: float = 10.0) -> None:
    """Publish one message at QoS 1 and wait for the broker's PUBACK, through the MQTT session every
    stormwatch client uses (:func:`stormwatch.runtime.mqttsession.publish_once`: credentials, TLS,
    the nodes of a broker cluster), with a clean session of its own client id.

    Raises:
        ManualEntryError: the broker cannot be reached or does not acknowledge in ``timeout_s``.
    """
    try:
        session.publish_once(broker, topic, payload, log, client_id=f"stormwatch-manual-{uuid.uuid4().hex[:12]}",
                             timeout_s=timeout_s)
    except OSError as exc:
        raise ManualEntryError(f"broker {broker.safe_url()}: {exc} (nothing sent)") from None
    except session.PublishUnconfirmed as exc:
        raise ManualEntryError(f"broker {broker.safe_url()} {exc} (the reading may not have arrived; sending it "
                               "again stores it once)") from None


def record_manual(entry: ManualEntry, cfg: SiteConfig, profiles: ProfileLibrary, clock: Clock, *,
                  store: ReadingStore | None = None, broker: BrokerSettings | None = None,
                  correct: bool = False) -> Recorded:
    """Validate ``entry`` as live data is validated, then store it (``store``) or publish it (``broker``:
    on the site's readings topic, where ingest stores it and the alert service evaluates it).

    A value for a sample already recorded with another value (same site, point, quantity, time and
    inspector) is refused, ``conflicting_value`` (in ``conflicts``; the stored one stays) -- unless
    ``correct``: then it replaces the recorded one (:meth:`~stormwatch.stores.base.ReadingStore.supersede`),
    which is kept in the store as a ``superseded`` dead letter naming both values, who corrected it
    and when (the audit trail); ``stormwatch evaluate`` and reports then use the corrected value. Only
    straight into a store: a live alert service has already judged the recorded value.

    Raises:
        ManualEntryError: the entry is refused (reason and detail of the first problem; nothing was
            stored or sent), or the broker did not take it.
        stormwatch.stores.base.StoreError: the store refused the write.
    """
    if (store is None) == (broker is None):
        raise ManualEntryError("record it in one place: --broker (the live path: ingest stores it, the alert "
                               "service evaluates it) or --store (straight into the store, for `evaluate`)")
    if correct and store is None:
        raise ManualEntryError("--correct replaces a value in the store: give --store (the live alert service has "
                               "already judged the recorded value; re-run `stormwatch evaluate` after correcting)")
    check_sample_place(cfg, entry.point)
    readings = manual_readings(entry)
    # a field notebook may be entered long after the sampling: no age bound (the future stays refused)
    validator = Validator.for_sites([cfg], profiles, clock, max_age_s=None)
    topic = topics.readings(cfg.site.id, MANUAL_GATEWAY)
    payload = dump_readings(readings)
    result = validator.validate(topic, payload)
    if result.dead:
        first = result.dead[0]
        raise ManualEntryError(f"{first.reason}: {first.detail.removeprefix('readings.0: ')} (nothing recorded)")
    stored = already = 0
    conflicts: tuple[Conflict, ...] = ()
    corrected: tuple[tuple[Reading, Reading], ...] = ()
    if store is not None:
        outcome = store.write_checked(readings)
        stored, already, conflicts = outcome.new, outcome.already, outcome.conflicts
        if correct and conflicts:
            corrected, conflicts = _correct(store, conflicts, topics.readings(cfg.site.id, MANUAL_GATEWAY), clock)
        for c in conflicts:
            log.info("manual %s %g %s at %s/%s sampled %s by %s refused (conflicting_value): %s", c.reading.quantity,
                        c.reading.value, c.reading.unit, c.reading.site, c.reading.device, c.reading.time.isoformat(),
                        c.reading.raw, c.detail())
    published = None
    if broker is not None:
        publish_once(broker, topic, payload)
        published = broker.safe_url()
    refused = {c.reading.identity for c in conflicts}
    for r in readings:
        if r.identity not in refused:
            log.info("manual %s %g %s at %s/%s sampled %s by %s", r.quantity, r.value, r.unit, r.site, r.device,
                     r.time.isoformat(), r.raw)
    return Recorded(tuple(readings), stored, already, published, conflicts, corrected)


def _correct(store: ReadingStore, conflicts: tuple[Conflict, ...], topic: str, clock: Clock,
             ) -> tuple[tuple[tuple[Reading, Reading], ...], tuple[Conflict, ...]]:
    """Replace each conflict's stored reading by its new value; keep each replaced one as a
    ``superseded`` dead letter. Returns the ``(replaced, new)`` pairs and the conflicts left (a
    stored reading at another time under the identity is not a correction of this sample).

    Raises:
        StoreError: the store failed (what was corrected before stays corrected and recorded).
    """
    done: list[tuple[Reading, Reading]] = []
    left: list[Conflict] = []
    for c in conflicts:
        new = c.reading
        old = store.supersede(new) if c.stored_time == new.time and c.stored_unit == new.unit else None
        if old is None:
            left.append(c)
            continue
        now = clock.now()
        store.write_deadletters([DeadLetter(
            "superseded", f"manual {new.quantity} {amount(old.value, new.unit)} at {new.site}/{new.device} sampled "
                          f"{new.time.isoformat()} (entered by {old.raw}) corrected to "
                          f"{amount(new.value, new.unit)} by "
                          f"{new.raw} at {now.isoformat()} (stormwatch readings add --correct)",
            topic, dump_readings([old]), now)])
        log.info("manual %s at %s/%s sampled %s corrected: %g -> %g %s by %s (the replaced reading is kept as a "
                    "superseded dead letter)", new.quantity, new.site, new.device, new.time.isoformat(), old.value,
                    new.value, new.unit, new.raw)
        done.append((old, new))
    return tuple(done), tuple(left)
