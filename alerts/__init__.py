"""Alert engine: one site's readings in event-time order → ordinance events and work orders.

The design: docs/alerts.md ("The modules", `alerts/__init__.py`).
"""

from stormwatch.alerts.rules.registry import rule_kinds as _rule_kinds

# The built-in rule modules declare the event kinds (and their typed details) as soon as anything of
# stormwatch.alerts is imported, so every event built or read in this process is typed; the user's
# rule directories ($STORMWATCH_RULES) are loaded with the first pack or engine that needs them.
_rule_kinds([])
