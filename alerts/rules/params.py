"""The parameters of one pack entry (``R1: {kind: storm, ...}``): the base every rule kind's pack
schema extends (:class:`stormwatch.alerts.rules.registry.RuleKind`'s ``params``).

Pack loading (:mod:`stormwatch.alerts.packs`) and the rule modules both build on it; it imports
neither. The meaning of each parameter is in docs/rules.md.
"""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from stormwatch.profiles import bool_for_number

#: The longest duration a rule parameter may have (:meth:`RuleParams._sane_duration`).
MAX_DURATION = timedelta(days=3650)
_DURATION_UNITS = {"_hours": "hours", "_days": "days", "_minutes": "minutes"}


class RuleParams(BaseModel):
    """A pack entry: the parameters of one rule. Each rule module subclasses it with its own fields
    and ``kind: Literal["<kind>"]`` (:mod:`stormwatch.alerts.rules.registry`).

    Attributes:
        kind: the rule kind.
        citation: the section it enforces.
        enabled: ``false``: the rule is not watched at this site (a pack option's choice, or the site).
        unverified: parameter -> why the permit text in hand does not confirm its value (written in a
            pack as ``{value: ..., verified: false, note: ...}``); every event of the rule names them.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: str
    citation: str = Field(min_length=1)
    enabled: bool = True
    unverified: dict[str, str] = Field(default_factory=dict)

    @field_validator("*", mode="before")
    @classmethod
    def _not_a_bool(cls, value: Any, info: ValidationInfo) -> Any:
        """A numeric parameter is never a YAML boolean (``dry_gap_hours: true`` is not 1 hour):
        ``true``/``false``/``yes``/``no``/``on``/``off`` load as ``bool``, which Python counts as 1
        and 0. Parameters whose type admits a bool (``enabled``) take one; other types say their own."""
        field = cls.model_fields.get(info.field_name or "")
        problem = bool_for_number(field.annotation if field is not None else None, value)
        if problem is not None:
            raise ValueError(problem)
        return value

    @field_validator("*")
    @classmethod
    def _sane_duration(cls, value: Any, info: ValidationInfo) -> Any:
        """A duration parameter (``*_hours``, ``*_days``, ``*_minutes``) is a finite number of at
        most :data:`MAX_DURATION` -- the longest thing a permit sets is a season, never ``1e308`` hours
        (which no clock can add: an OverflowError deep in a rule)."""
        name = info.field_name or ""
        unit = next((u for suffix, u in _DURATION_UNITS.items() if name.endswith(suffix)), None)
        if unit is not None and isinstance(value, (int, float)) and not isinstance(value, bool):
            if not math.isfinite(value) or abs(value) > MAX_DURATION / timedelta(**{unit: 1}):
                raise ValueError(f"{value:g} {unit} is longer than {MAX_DURATION.days // 365} years: not a duration "
                                 "of a permit or an ordinance")
        return value

    def unverified_values(self) -> list[str]:
        """``["parameter=value", ...]`` of the parameters not confirmed by the permit text, sorted."""
        return [f"{name}={_shown(getattr(self, name, None))}" for name in sorted(self.unverified)]


#: Parameters every rule has that are not the rule's own (never listed as a rule's parameters).
BASE_FIELDS = frozenset({"kind", "unverified"})


def _shown(value: object) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)
