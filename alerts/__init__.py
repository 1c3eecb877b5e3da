"""Alert engine: one site's readings in event-time order → ordinance events and work orders.

* :mod:`alerts.packs` -- jurisdiction rule packs (``alerts/packs/*.yaml``) and site overrides.
* :mod:`alerts.geometry` -- basin stage–storage and lost capacity.
* :mod:`alerts.rules` -- R1 storm, R1w routine, R2 turbidity, R3 basin.
* :mod:`alerts.workorders` -- inspection work orders (SQLite); :mod:`alerts.business_days` (Ch. 196 reports).
* :mod:`alerts.engine` -- :class:`~alerts.engine.Engine`: watermark, reorder buffer, late re-evaluation.
* :mod:`alerts.backfill` -- ``stormwatch evaluate``: the rules over stored readings; gaps never dry.
* :mod:`alerts.service` -- the MQTT service (``stormwatch alerts``).
* :mod:`alerts.webhook`, :mod:`alerts.ical` -- event webhook with retries; iCalendar feed of due dates.

Parameters, defaults and citations: ``docs/rules.md``.
"""
