"""Jurisdiction rule packs: the thresholds and clocks of each village code, as data.

A pack is ``<name>.yaml`` (the site's ``site.jurisdiction`` names it): the built-ins ship in
``alerts/packs/``; a user's own packs live in directories named by ``stormwatch --packs DIR`` or
``STORMWATCH_PACKS``, searched first::

    name: ch133
    title: ...
    source: docs/reference/ordinances/ch133.txt
    rules:
      R1:  {kind: storm, citation: "Ch. 133 §133-7A(2)", threshold_in: "0.5", dry_gap_hours: 6, ...}
      R1w: {kind: routine, citation: ..., every_days: 7}
      R1r: {kind: report, citation: "Ch. 196 §196-9B", within_business_days: 2}
      R2:  {kind: turbidity, citation: "Ch. 133 §133-6C", criterion: washington, ...}
      R3:  {kind: basin, citation: "Ch. 133 §133-7A(1)", cleanout_fraction: 0.5, ...}

Each ``kind`` is a rule module's (:mod:`stormwatch.alerts.rules.registry`): its schema validates the
entry. The operational meaning and defaults of every parameter are in ``docs/rules.md``.
A site overrides parameters with ``SiteConfig.rules`` (rule id → parameter → value); each
override is logged at load.

Errors: :func:`load_pack` raises :class:`PackError` naming the file and the bad key, e.g.
``ch133.yaml: rules.R1.dry_gap_hours: Input should be greater than 0`` or
``site rules.R9: no rule 'R9' in pack ch133``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, SerializeAsAny, ValidationError, field_validator

from stormwatch import resources
from stormwatch.errors import InputError, load_yaml

if TYPE_CHECKING:
    from stormwatch.alerts.rules.basin import BasinRule
    from stormwatch.alerts.rules.report import ReportRule
    from stormwatch.alerts.rules.routine import RoutineRule
    from stormwatch.alerts.rules.storm import StormRule
    from stormwatch.alerts.rules.turbidity import TurbidityRule

log = logging.getLogger(__name__)


def packs_search_path(directories: Path | Sequence[Path] | None = None) -> list[Path]:
    """Where packs are looked up, first match wins: ``directories``, ``$STORMWATCH_PACKS``, built-ins."""
    return resources.search_path(directories, resources.PACKS_ENV, resources.builtin_packs_dir())


def pack_sources(directories: Path | Sequence[Path] | None = None) -> list[resources.Found]:
    """Every pack by name with the file it comes from (``stormwatch packs list``)."""
    return resources.find_all(packs_search_path(directories), resources.builtin_packs_dir())


class RuleParams(BaseModel):
    """A pack entry: the parameters of one rule. Each rule module subclasses it with its own fields
    and ``kind: Literal["<kind>"]`` (:mod:`stormwatch.alerts.rules.registry`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: str
    citation: str = Field(min_length=1)


P = TypeVar("P", bound=RuleParams)


def _rule_kinds() -> Any:
    from stormwatch.alerts.rules.registry import rule_kinds

    return rule_kinds()


class RulePack(BaseModel):
    """One jurisdiction's rules. ``rules`` maps rule id (``R1``, ``R1w``, ``R1r``, ``R2``, ``R3``) to
    the parameters of a rule kind of the registry (each entry validated by its kind's schema)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    title: str = ""
    source: str = ""
    rules: dict[str, SerializeAsAny[RuleParams]] = Field(default_factory=dict)

    @field_validator("rules", mode="before")
    @classmethod
    def _by_kind(cls, value: object) -> object:
        if not isinstance(value, dict):
            return value
        registry = _rule_kinds()
        out: dict[str, object] = {}
        for rule_id, entry in value.items():
            if isinstance(entry, RuleParams):
                out[rule_id] = entry
                continue
            kind = entry.get("kind") if isinstance(entry, dict) else None
            if kind not in registry.kinds:
                known = ", ".join(sorted(registry.kinds))
                raise ValueError(f"{rule_id}.kind: {kind!r} is not a rule kind (known: {known})")
            try:
                out[rule_id] = registry.kinds[kind].params.model_validate(entry)
            except ValidationError as exc:
                err = exc.errors()[0]
                loc = ".".join(str(p) for p in err["loc"])
                raise ValueError(f"{rule_id}.{loc}: {err['msg']}") from None
        return out

    def first(self, cls: type[P]) -> tuple[str, P] | None:
        """``(rule id, params)`` of the first rule whose parameters are a ``cls``, or ``None``."""
        for rule_id, rule in self.rules.items():
            if isinstance(rule, cls):
                return rule_id, rule
        return None

    def storm(self) -> tuple[str, StormRule] | None:
        """``(rule id, rule)`` of the storm rule (R1), or ``None``."""
        from stormwatch.alerts.rules.storm import StormRule

        return self.first(StormRule)

    def routine(self) -> tuple[str, RoutineRule] | None:
        from stormwatch.alerts.rules.routine import RoutineRule

        return self.first(RoutineRule)

    def report(self) -> tuple[str, ReportRule] | None:
        from stormwatch.alerts.rules.report import ReportRule

        return self.first(ReportRule)

    def turbidity(self) -> tuple[str, TurbidityRule] | None:
        from stormwatch.alerts.rules.turbidity import TurbidityRule

        return self.first(TurbidityRule)

    def basin(self) -> tuple[str, BasinRule] | None:
        from stormwatch.alerts.rules.basin import BasinRule

        return self.first(BasinRule)


class PackError(InputError):
    """A pack that cannot be loaded or an override that does not apply; names file and key."""


def _validation_message(source: str, exc: ValidationError, prefix: str = "") -> str:
    lines = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"])
        msg = err["msg"]
        if err["loc"] == ("rules",) and msg.startswith("Value error, "):  # a rule entry: its own key path
            where, _, msg = msg.removeprefix("Value error, ").partition(": ")
            loc = f"rules.{where}"
        lines.append(f"{source}: {prefix}{loc}: {msg}")
    return "\n".join(lines)


def load_pack(name: str, overrides: dict[str, dict[str, Any]] | None = None,
              directory: Path | Sequence[Path] | None = None, *, source: str = "site") -> RulePack:
    """Load pack ``<name>.yaml`` from the pack search path and apply site overrides.

    Args:
        name: pack name (the site's jurisdiction, e.g. ``ch133``).
        overrides: ``SiteConfig.rules`` (rule id → parameter → value); each one is logged.
        directory: user pack directories searched first (then ``$STORMWATCH_PACKS``, then the
            built-in packs, :func:`packs_search_path`).
        source: where ``overrides`` come from (the site file's name), named in override errors
            and logs: ``site.yaml: rules.R1.dry_gaps: not a parameter of R1 (...)``.

    Raises:
        PackError: missing file (known packs listed), bad YAML, schema error (file and key),
            ``name`` differing from the file name, or an override naming an unknown rule or
            parameter or giving an invalid value.
    """
    search = packs_search_path(directory)
    path = resources.find_one(name, search)
    if path is None:
        known = ", ".join(f.name for f in pack_sources(directory)) or "none"
        raise PackError(f"no rule pack {name!r} in {', '.join(str(d) for d in search)} (known: {known})")
    data = load_yaml(path, PackError, what="rule pack")
    if not isinstance(data, dict):
        raise PackError(f"{path}: expected a mapping at the top level")
    try:
        pack = RulePack.model_validate(data)
    except ValidationError as exc:
        raise PackError(_validation_message(str(path), exc)) from exc
    if pack.name != name:
        raise PackError(f"{path}: name: {pack.name!r} must equal the file name {name!r}")
    return apply_overrides(pack, overrides or {}, source=source)


def apply_overrides(pack: RulePack, overrides: dict[str, dict[str, Any]], source: str = "site") -> RulePack:
    """A copy of ``pack`` with per-site parameter overrides applied (each logged at INFO).

    ``source`` names where the overrides come from (the site file) in errors and logs.

    Raises:
        PackError: unknown rule id or parameter, or a value the rule's schema rejects.
    """
    if not overrides:
        return pack
    rules = dict(pack.rules)
    for rule_id, params in overrides.items():
        if rule_id not in rules:
            raise PackError(f"{source}: rules.{rule_id}: no rule {rule_id!r} in pack {pack.name} "
                            f"(rules: {', '.join(sorted(rules)) or 'none'})")
        current = rules[rule_id]
        fields = type(current).model_fields
        merged = current.model_dump()
        for key, value in params.items():
            if key not in fields or key == "kind":
                raise PackError(f"{source}: rules.{rule_id}.{key}: not a parameter of {rule_id} "
                                f"(parameters: {', '.join(k for k in fields if k != 'kind')})")
            log.info("pack %s: site override %s.%s = %r (pack default %r, from %s)",
                     pack.name, rule_id, key, value, merged[key], source)
            merged[key] = value
        try:
            rules[rule_id] = type(current).model_validate(merged)
        except ValidationError as exc:
            raise PackError(_validation_message(source, exc, prefix=f"rules.{rule_id}.")) from exc
    return pack.model_copy(update={"rules": rules})
