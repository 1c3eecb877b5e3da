"""Alert engine: one site's readings in event-time order → ordinance events and work orders.

* :mod:`stormwatch.alerts.packs` -- jurisdiction rule packs (``alerts/packs/*.yaml``) and site overrides.
* :mod:`stormwatch.alerts.geometry` -- basin stage–storage and lost capacity.
* :mod:`stormwatch.alerts.rules` -- one module per rule kind (R1 storm, R1w routine, R1r report, R2 turbidity,
  R3 basin), found by :mod:`stormwatch.alerts.rules.registry`; :mod:`stormwatch.alerts.asyncapi` -- the event
  schemas of docs/asyncapi.yaml from the registry.
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

from stormwatch.alerts.rules.registry import rule_kinds as _rule_kinds

# The built-in rule modules declare the event kinds (and their typed details) as soon as anything of
# stormwatch.alerts is imported, so every event built or read in this process is typed; the user's
# rule directories ($STORMWATCH_RULES) are loaded with the first pack or engine that needs them.
_rule_kinds([])
