"""Alert engine: one site's readings in event-time order → ordinance events and work orders.

* :mod:`stormwatch.alerts.packs` -- jurisdiction rule packs (``alerts/packs/*.yaml``) and site overrides.
* :mod:`stormwatch.alerts.geometry` -- basin stage–storage and lost capacity.
* :mod:`stormwatch.alerts.rules` -- R1 storm, R1w routine, R2 turbidity, R3 basin.
* :mod:`stormwatch.alerts.workorders` -- inspection work orders (SQLite);
  :mod:`stormwatch.alerts.business_days` (Ch. 196 reports).
* :mod:`stormwatch.alerts.engine` -- :class:`~stormwatch.alerts.engine.Engine`: watermark, reorder buffer,
  late re-evaluation.
* :mod:`stormwatch.alerts.backfill` -- ``stormwatch evaluate``: the rules over stored readings; gaps never dry.
* :mod:`stormwatch.alerts.service` -- the MQTT service (``stormwatch alerts``).
* :mod:`stormwatch.alerts.webhook`, :mod:`stormwatch.alerts.ical` -- event webhook with retries; iCalendar
  feed of due dates.

Parameters, defaults and citations: ``docs/rules.md``.
"""
