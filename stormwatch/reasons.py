"""Why input was refused: the ONE set of dead-letter reasons.

Every :class:`stormwatch.stores.base.DeadLetter` carries one of these codes (it refuses any other), so a
dashboard, an alert rule or a person filtering ``stormwatch/v1/deadletter`` or the ``deadletter``
table/measurement can rely on the list below being complete. The same list is the reason table of
``docs/ingest.md`` (section 2) and the ``reason`` enum of ``docs/asyncapi.yaml``;
``tests/ingest/test_refusal_reasons.py`` checks that both agree with :data:`REASONS` and that every
reason has a test that produces it through the real code path.

Adding a reason: one entry here (code and when it applies), a row in ``docs/ingest.md``, the
enum of ``docs/asyncapi.yaml``, and a case in ``tests/ingest/test_refusal_reasons.py``.

Which code refuses with which reason:

* :func:`stormwatch.contract.parse_readings` (the wire contract): ``not_utf8``, ``bad_json``,
  ``schema``;
* :class:`stormwatch.ingest.validate.Validator` (the site configuration and device profiles):
  ``bad_topic`` ... ``implausible_time``;
* :class:`stormwatch.ingest.consumer.Ingest`: ``duplicate``, ``internal_error``;
* every store (:meth:`stormwatch.stores.base.ReadingStore.write_checked`): ``conflicting_value``; the
  InfluxDB stores (:mod:`stormwatch.stores.influxwrite`): ``store_rejected``;
* a manual correction (:func:`stormwatch.importers.manual.record_manual` with ``correct``): ``superseded``.

Whichever stage refuses a reading, ingest sends its dead letter through one place
(:meth:`stormwatch.ingest.consumer.Ingest` ``_process``): stored, published on
``stormwatch/v1/deadletter``, counted by reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

#: reason code -> when it applies (one sentence; the docs table says the same).
REASONS: Mapping[str, str] = MappingProxyType({
    "not_utf8": "the payload is not UTF-8",
    "bad_json": "the payload is not JSON (syntax, nesting deeper than the decoder allows, an integer "
                "literal too long to convert, a lone UTF-16 surrogate escape)",
    "schema": "a field is missing, unknown or of the wrong JSON type (a number sent as a string, a "
              "rain_tips value that is not an integer, a time that is not RFC 3339 text, an identifier "
              "outside the grammar, a non-finite value); the detail names the field",
    "bad_topic": "the topic is not stormwatch/v1/<site>/<gateway>/readings",
    "topic_mismatch": "the reading's site or gateway differs from the topic's",
    "unknown_site": "no site configuration for the site",
    "unknown_gateway": "the gateway is not the site's gateway_id",
    "unknown_device": "the device is not in the site configuration",
    "unknown_quantity": "the device's profile does not produce that quantity",
    "unit_mismatch": "the unit differs from the profile's unit for that quantity (NTU vs FNU)",
    "tip_size_mismatch": "a rain reading's tip size differs from the size the site file gives the gauge at "
                         "its time (its profile, or a replaced_gauges entry)",
    "impossible_value": "a value physics forbids: a negative tip count, turbidity, distance or water/sediment "
                        "depth (stormwatch.physics.NON_NEGATIVE)",
    "future_time": "the event time is more than max_future_s ahead of the clock (gateway clock skew)",
    "implausible_time": "the event time is more than max_age_s behind the clock: a gateway clock that lies "
                        "(no real-time clock, booted before NTP: 1970-01-01)",
    "duplicate": "the identity (gateway, boot, seq) is already stored with the same measurement, or twice in one "
                 "batch",
    "conflicting_value": "the identity (gateway, boot, seq) is already stored with another measurement (value, "
                         "unit, time, device): the stored reading is kept, this one refused -- a manual entry or "
                         "imported row for a sample already recorded, a gateway that reuses an identity",
    "superseded": "a manual reading replaced by an explicit correction (stormwatch readings add --correct); the "
                  "payload is the reading as it was recorded, the detail both values, who corrected it and when",
    "store_rejected": "the store's server refused to hold the reading (InfluxDB: field type conflict, beyond the "
                      "retention policy)",
    "internal_error": "a bug in validation (the exception is logged with its traceback)",
})


class UnknownReason(ValueError):
    """A dead letter with a reason that is not in :data:`REASONS`."""


def check_reason(reason: str) -> str:
    """``reason`` itself when it is one of :data:`REASONS`.

    Raises:
        UnknownReason: any other code (add it to :data:`REASONS` first).
    """
    if reason not in REASONS:
        raise UnknownReason(f"dead-letter reason {reason!r} is not one of stormwatch.reasons.REASONS "
                            f"({', '.join(REASONS)})")
    return reason
