"""Quality flags of imported readings: the gateway's own checks, so a file is judged like live data.

A value read from a logger file gets the flags a live poll of the same device would get
(:mod:`stormwatch.gateway.qc`, the ONE implementation; nothing is re-implemented here):

* ``out_of_range`` -- outside the profile point's ``valid_range`` (:func:`stormwatch.gateway.qc.check_value`);
* ``device_error`` -- the raw value (``(value - offset) / scale``) is one of the point's
  ``error_codes``, or the file's ``device_error`` column is non-zero at the same time (the device's
  error register for that poll, sensors.md "Turbidity probes");
* ``flatline`` / ``spike`` -- :class:`stormwatch.gateway.qc.ValueHistory` over the file's values of that
  quantity in event-time order (the point's ``qc`` parameters).

The design: docs/importing.md ("The modules", `importers/qc.py`).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime

from stormwatch.contract import Reading
from stormwatch.gateway.qc import DEVICE_ERROR_QUANTITY, ValueHistory, check_value
from stormwatch.profiles import DeviceProfile, ValueSpec

log = logging.getLogger(__name__)


def value_specs(profile: DeviceProfile) -> dict[str, ValueSpec]:
    """quantity -> the profile's point/field declaring it (range, error codes, QC parameters)."""
    if profile.protocol == "modbus" and profile.modbus is not None:
        specs: list[ValueSpec] = list(profile.modbus.points)
    elif profile.protocol == "serial_line" and profile.serial_line is not None:
        specs = list(profile.serial_line.fields.values())
    elif profile.sdi12 is not None:
        specs = list(profile.sdi12.values.values())
    else:
        specs = []
    out: dict[str, ValueSpec] = {}
    for spec in specs:
        out.setdefault(spec.quantity, spec)
    return out


def flag_readings(readings: Sequence[Reading], profile: DeviceProfile) -> list[Reading]:
    """``readings`` (one device) with the live QC flags added; same order, nothing dropped.

    Args:
        readings: readings of one device, any quantity (values in the profile's units).
        profile: the device's profile.

    Returns:
        New readings; a reading without flags is returned unchanged.
    """
    specs = value_specs(profile)
    errors_at: set[datetime] = {r.time for r in readings if r.quantity == DEVICE_ERROR_QUANTITY and r.value != 0}
    histories: dict[str, ValueHistory] = defaultdict(ValueHistory)
    flags_of: dict[int, tuple[str, ...]] = {}
    order = sorted(range(len(readings)), key=lambda i: readings[i].time)
    for i in order:
        r = readings[i]
        spec = specs.get(r.quantity)
        if spec is None or r.quantity == DEVICE_ERROR_QUANTITY:
            continue
        value = float(r.value)
        raw = (value - spec.offset) / spec.scale
        verdict = check_value(value, raw, spec.valid_range, spec.error_codes, r.time in errors_at)
        flags = (*verdict.flags, *histories[r.quantity].check(value, spec.qc))
        if flags:
            flags_of[i] = flags
    if flags_of:
        log.info("%d imported readings carry QC flags", len(flags_of))
    return [r.model_copy(update={"flags": tuple(dict.fromkeys((*r.flags, *flags_of[i])))}) if i in flags_of else r
            for i, r in enumerate(readings)]
