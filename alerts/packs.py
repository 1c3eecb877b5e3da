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
    enforcement: {notice: ..., clocks: ..., penalty: ...}   # stormwatch.alerts.enforcement_pack

Each ``kind`` is a rule module's (:mod:`stormwatch.alerts.rules.registry`): its schema validates the
entry. The operational meaning and defaults of every parameter are in ``docs/rules.md``.
A site overrides parameters with ``SiteConfig.rules`` (rule id → parameter → value); each
override is logged at load.

**What the permit text confirms** (issue 16). A parameter the permit text in hand does not
confirm is written ``{value: ..., verified: false, note: "why"}``; the entry's ``unverified``
holds ``parameter -> note`` and every event of that rule says so (``Event.unverified``). A site
that sets such a parameter itself (its own permit in hand) takes it over: it is no longer marked.

**Choices the permit leaves to the site** (``options:``). A pack may name options, each a set of
choices that adjust its rules (``enabled: false`` switches a rule off)::

    options:
      inspection_frequency:
        citation: "EPA CGP 2022 Part 4.2"
        default: 7-day-and-storm
        choices:
          7-day: {summary: "...", rules: {R1: {enabled: false}}}
          14-day-and-storm: {summary: "...", rules: {R1w: {every_days: 14}}}

and a site chooses in its file (``options: {inspection_frequency: 14-day-and-storm}``); a site that
does not choose gets ``default`` (logged). Choices are applied before the site's own overrides.

Errors: :func:`load_pack` raises :class:`PackError` naming the file and the bad key, e.g.
``ch133.yaml: rules.R1.dry_gap_hours: Input should be greater than 0`` or
``site rules.R9: no rule 'R9' in pack ch133``.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializeAsAny,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from stormwatch import resources
from stormwatch.alerts.enforcement_pack import EnforcementSection
from stormwatch.errors import InputError, load_yaml, problems_message
from stormwatch.profiles import bool_for_number

if TYPE_CHECKING:
    from stormwatch.alerts.rules.basin import BasinRule
    from stormwatch.alerts.rules.report import ReportRule
    from stormwatch.alerts.rules.routine import RoutineRule
    from stormwatch.alerts.rules.storm import StormRule
    from stormwatch.alerts.rules.turbidity import TurbidityRule
    from stormwatch.config import SiteConfig

log = logging.getLogger(__name__)


def packs_search_path(directories: Path | Sequence[Path] | None = None) -> list[Path]:
    """Where packs are looked up, first match wins: ``directories``, ``$STORMWATCH_PACKS``, built-ins."""
    return resources.search_path(directories, resources.PACKS_ENV, resources.builtin_packs_dir())


def pack_sources(directories: Path | Sequence[Path] | None = None) -> list[resources.Found]:
    """Every pack by name with the file it comes from (``stormwatch packs list``)."""
    return resources.find_all(packs_search_path(directories), resources.builtin_packs_dir())


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


#: Keys of a parameter written with its verification: ``{value: ..., verified: false, note: ...}``.
_MARKED = frozenset({"value", "verified", "note"})


def _unwrap(rule_id: str, entry: dict[str, Any]) -> dict[str, Any]:
    """A pack entry with ``{value:, verified:, note:}`` parameters unwrapped into plain values and the
    unconfirmed ones collected in ``unverified``.

    Raises:
        ValueError: a marked parameter without ``value``, or ``verified`` that is not a boolean.
    """
    out: dict[str, Any] = {}
    unverified = dict(entry.get("unverified") or {})
    for key, value in entry.items():
        if key == "unverified":
            continue
        if isinstance(value, dict) and "value" in value and set(value) <= _MARKED:
            verified = value.get("verified", True)
            if not isinstance(verified, bool):
                raise ValueError(f"{rule_id}.{key}.verified: true or false, not {verified!r}")
            if not verified:
                unverified[key] = str(value.get("note") or "not confirmed by the permit text in hand")
            out[key] = value["value"]
        elif isinstance(value, dict) and set(value) & _MARKED and "value" not in value:
            raise ValueError(f"{rule_id}.{key}: a parameter marked with verified/note needs its value "
                             "({value: ..., verified: false, note: ...})")
        else:
            out[key] = value
    if unverified:
        out["unverified"] = unverified
    return out


class OptionChoice(BaseModel):
    """One choice of a pack option: what it means and the rule parameters it sets.

    Attributes:
        summary: one line for the site's author (the permit's wording).
        rules: rule id -> parameter -> value (``enabled: false`` switches a rule off).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    summary: str = ""
    rules: dict[str, dict[str, Any]] = Field(default_factory=dict)


class PackOption(BaseModel):
    """A choice the permit leaves to the site (``options:`` of a pack; the site file's ``options:``).

    Attributes:
        summary: what is chosen.
        citation: the section that offers the choice.
        default: the choice of a site that does not choose (logged).
        choices: name -> :class:`OptionChoice`.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    summary: str = ""
    citation: str = ""
    default: str
    choices: dict[str, OptionChoice] = Field(min_length=1)

    @model_validator(mode="after")
    def _known_default(self) -> PackOption:
        if self.default not in self.choices:
            raise ValueError(f"default {self.default!r} is not one of the choices ({', '.join(self.choices)})")
        return self


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
    options: dict[str, PackOption] = Field(default_factory=dict)
    #: what the code prescribes after a violation (:mod:`stormwatch.alerts.enforcement_pack`); ``None``: a
    #: permit, or a code whose enforcement the pack does not describe
    enforcement: EnforcementSection | None = None

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
            assert isinstance(entry, dict)
            try:
                out[rule_id] = registry.kinds[kind].params.model_validate(_unwrap(rule_id, entry))
            except ValidationError as exc:
                err = exc.errors()[0]
                loc = ".".join(str(p) for p in err["loc"])
                raise ValueError(f"{rule_id}.{loc}: {err['msg']}") from None
        return out

    def first(self, cls: type[P]) -> tuple[str, P] | None:
        """``(rule id, params)`` of the first enabled rule whose parameters are a ``cls``, or ``None``."""
        for rule_id, rule in self.rules.items():
            if isinstance(rule, cls) and rule.enabled:
                return rule_id, rule
        return None

    def all(self, cls: type[P]) -> list[tuple[str, P]]:
        """``(rule id, params)`` of every enabled rule whose parameters are a ``cls``, in pack order."""
        return [(rule_id, rule) for rule_id, rule in self.rules.items() if isinstance(rule, cls) and rule.enabled]

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
        lines.append(f"{prefix}{loc}: {msg.removeprefix('Value error, ')}")
    return problems_message(source, lines)


def load_pack(name: str, overrides: dict[str, dict[str, Any]] | None = None,
              directory: Path | Sequence[Path] | None = None, *, source: str = "site",
              options: dict[str, str] | None = None) -> RulePack:
    """Load pack ``<name>.yaml`` from the pack search path, apply the site's option choices, then its
    overrides.

    Args:
        name: pack name (the site's jurisdiction, e.g. ``ch133``).
        overrides: ``SiteConfig.rules`` (rule id → parameter → value); each one is logged.
        directory: user pack directories searched first (then ``$STORMWATCH_PACKS``, then the
            built-in packs, :func:`packs_search_path`).
        source: where ``overrides`` come from (the site file's name), named in override errors
            and logs: ``site.yaml: rules.R1.dry_gaps: not a parameter of R1 (...)``.
        options: ``SiteConfig.options`` (option → choice); an option the site does not choose takes
            the pack's default (logged). ``None``: every default, silently (a pack on its own).

    Raises:
        PackError: missing file (known packs listed), bad YAML, schema error (file and key),
            ``name`` differing from the file name, an unknown option or choice, or an override
            naming an unknown rule or parameter or giving an invalid value.
    """
    search = packs_search_path(directory)
    path = resources.find_one(name, search)
    if path is None:
        known = ", ".join(f.name for f in pack_sources(directory)) or "none"
        raise PackError(f"no rule pack {name!r} in {', '.join(str(d) for d in search)} (known: {known})")
    data = load_yaml(path, PackError, what="rule pack")
    if not isinstance(data, dict):
        raise PackError(f"{path}: expected a mapping at the top level")
    _rule_kinds()  # the rule modules first: one that cannot load is its own error (its file), not the pack's
    try:
        pack = RulePack.model_validate(data)
    except ValidationError as exc:
        raise PackError(_validation_message(str(path), exc)) from exc
    if pack.name != name:
        raise PackError(f"{path}: name: {pack.name!r} must equal the file name {name!r}")
    for option_name, option in pack.options.items():
        for choice_name, choice in option.choices.items():
            for rule_id in choice.rules:
                if rule_id not in pack.rules:
                    raise PackError(f"{path}: options.{option_name}.choices.{choice_name}.rules.{rule_id}: "
                                    f"no rule {rule_id!r} in the pack")
    pack = apply_options(pack, options, source=source)
    return apply_overrides(pack, overrides or {}, source=source)


def load_site_pack(cfg: SiteConfig, directory: Path | Sequence[Path] | None = None, *,
                   source: str = "site") -> RulePack:
    """The pack of a site: its ``site.jurisdiction`` with its ``options`` and ``rules`` applied
    (:func:`load_pack`).

    Raises:
        PackError: see :func:`load_pack`.
    """
    return load_pack(cfg.site.jurisdiction, cfg.rules, directory, source=source, options=cfg.options)


def check_site_pack(cfg: SiteConfig, path: Path) -> None:
    """Check the site file at ``path`` (loaded as ``cfg``) against its pack: its ``jurisdiction``
    names a pack on the search path, its ``options`` choices and ``rules`` overrides apply
    (:func:`load_site_pack`). A :data:`stormwatch.runtime.cliutil.SiteCheck`, the one every command runs.

    Raises:
        PackError: as :func:`load_pack`; an unknown pack names the site file and its key
            (``site.yaml: site.jurisdiction: no rule pack 'ch999' in ... (known: ...)``).
    """
    try:
        load_site_pack(cfg, source=str(path))
    except PackError as exc:
        if str(exc).startswith("no rule pack"):  # name the site file and its key, not only the pack directory
            raise PackError(f"{path}: site.jurisdiction: {exc}") from None
        raise


def apply_options(pack: RulePack, chosen: dict[str, str] | None, source: str = "site") -> RulePack:
    """A copy of ``pack`` with the rule parameters of each option's choice set (the site's, else the
    default). A parameter a choice sets keeps its pack verification mark unless the choice's value
    differs from the pack's (the pack's note then no longer applies).

    Raises:
        PackError: an option the pack does not have, or a choice it does not offer.
    """
    given = dict(chosen or {})
    for name in given:
        if name not in pack.options:
            known = ", ".join(sorted(pack.options)) or "none"
            raise PackError(f"{source}: options.{name}: pack {pack.name} has no option {name!r} (options: {known})")
    rules = dict(pack.rules)
    for name, option in pack.options.items():
        choice = given.get(name)
        if choice is None:
            choice = option.default
            if chosen is not None:
                log.warning("pack %s: %s does not choose options.%s: watching %r (the pack's default; choices: "
                            "%s)", pack.name, source, name, choice, ", ".join(option.choices))
        elif choice not in option.choices:
            raise PackError(f"{source}: options.{name}: {choice!r} is not a choice of pack {pack.name} "
                            f"(choices: {', '.join(option.choices)})")
        else:
            log.info("pack %s: %s chooses options.%s = %s", pack.name, source, name, choice)
        for rule_id, params in option.choices[choice].rules.items():
            current = rules[rule_id]
            merged = current.model_dump()
            unverified = dict(current.unverified)
            for key, value in params.items():
                if key not in type(current).model_fields or key in BASE_FIELDS:
                    raise PackError(f"pack {pack.name}: options.{name}.choices.{choice}.rules.{rule_id}.{key}: "
                                    f"not a parameter of {rule_id}")
                if merged[key] != value:
                    unverified.pop(key, None)
                merged[key] = value
            merged["unverified"] = unverified
            try:
                rules[rule_id] = type(current).model_validate(merged)
            except ValidationError as exc:
                where = f"options.{name}.choices.{choice}.rules.{rule_id}."
                raise PackError(_validation_message(f"pack {pack.name}", exc, prefix=where)) from exc
    return pack.model_copy(update={"rules": rules})


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
        unverified = dict(current.unverified)
        told: list[tuple[object, ...]] = []  # logged once the override is valid: an error is the only line
        for key, value in params.items():
            if key not in fields or key in BASE_FIELDS:
                raise PackError(f"{source}: rules.{rule_id}.{key}: not a parameter of {rule_id} "
                                f"(parameters: {', '.join(k for k in fields if k not in BASE_FIELDS)})")
            told.append(("pack %s: site override %s.%s = %r (pack default %r, from %s)",
                         pack.name, rule_id, key, value, merged[key], source))
            if unverified.pop(key, None) is not None:
                told.append(("pack %s: %s.%s was not confirmed by the pack's permit text; %s sets it: no longer "
                             "marked", pack.name, rule_id, key, source))
            merged[key] = value
        merged["unverified"] = unverified
        try:
            rules[rule_id] = type(current).model_validate(merged)
        except ValidationError as exc:
            raise PackError(_validation_message(source, exc, prefix=f"rules.{rule_id}.")) from exc
        for message, *args in told:
            log.info(str(message), *args)
    return pack.model_copy(update={"rules": rules})
