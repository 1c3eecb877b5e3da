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

The operational meaning and defaults of every parameter are in ``docs/reference/rules.md``.
A site overrides parameters with ``SiteConfig.rules`` (rule id → parameter → value); each
override is logged at load.

Errors: :func:`load_pack` raises :class:`PackError` naming the file and the bad key, e.g.
``ch133.yaml: rules.R1.dry_gap_hours: Input should be greater than 0`` or
``site rules.R9: no rule 'R9' in pack ch133``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from stormwatch import resources
from stormwatch.errors import InputError, load_yaml

log = logging.getLogger(__name__)


def packs_search_path(directories: Path | Sequence[Path] | None = None) -> list[Path]:
    """Where packs are looked up, first match wins: ``directories``, ``$STORMWATCH_PACKS``, built-ins."""
    return resources.search_path(directories, resources.PACKS_ENV, resources.builtin_packs_dir())


def pack_sources(directories: Path | Sequence[Path] | None = None) -> list[resources.Found]:
    """Every pack by name with the file it comes from (``stormwatch packs list``)."""
    return resources.find_all(packs_search_path(directories), resources.builtin_packs_dir())


class _Rule(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    citation: str = Field(min_length=1)


class StormRule(_Rule):
    """R1: inspection within 24 h of a storm producing ≥ 0.5 in (rules.md R1).

    Attributes:
        threshold_in: storm depth that qualifies, an exact decimal string (compared as a Fraction).
        dry_gap_hours: a storm ends after this long without a tip; tips separated by ≥ this are
            two storms.
        inspection_within_hours: the inspection deadline after the clock start.
        clock_from: ``last_tip`` (deadline = last tip + 24 h) or ``threshold`` (stricter: from the
            tip that crossed the threshold).
        definition: ``dry_gap`` (default: the storm's whole depth counts) or ``rolling`` (for
            permits written as "X inches within a 24-hour period", e.g. EPA CGP 2022: the storm
            qualifies when the tips of any trailing ``rolling_window_hours`` window reach the
            threshold; storms are still delimited by the dry gap).
        rolling_window_hours: the trailing window of ``rolling`` (24 h).
    """

    kind: Literal["storm"]
    threshold_in: str = "0.5"
    dry_gap_hours: float = Field(default=6.0, gt=0)
    inspection_within_hours: float = Field(default=24.0, gt=0)
    clock_from: Literal["last_tip", "threshold"] = "last_tip"
    definition: Literal["dry_gap", "rolling"] = "dry_gap"
    rolling_window_hours: float = Field(default=24.0, gt=0)

    @field_validator("threshold_in", mode="before")
    @classmethod
    def _exact(cls, v: object) -> str:
        text = str(v)
        try:
            value = Fraction(text)
        except (ValueError, ZeroDivisionError) as exc:
            raise ValueError(f"threshold_in must be an exact decimal like '0.5', got {v!r}") from exc
        if value <= 0:
            raise ValueError("threshold_in must be > 0")
        return text

    @property
    def threshold(self) -> Fraction:
        """The threshold in inches, exact."""
        return Fraction(self.threshold_in)


class RoutineRule(_Rule):
    """R1w: routine inspection every ``every_days`` days (§133-7A(2), §196-9B: seven days).

    Attributes:
        every_days: cadence in whole local calendar days (a DST week is 167 or 169 h); counted from
            the last completed routine inspection, else from the site's first reading.
        storm_inspection_counts: whether a completed storm inspection restarts the cadence
            (rules.md: default no).
    """

    kind: Literal["routine"]
    every_days: int = Field(default=7, gt=0)
    storm_inspection_counts: bool = False


class ReportRule(_Rule):
    """R1r: inspection report to the SMO within N business days of the inspection (§196-9B).

    Attributes:
        within_business_days: business days after the inspection date (weekends and public
            holidays excluded).
        holidays: ``<country>-<subdivision>`` for python-holidays, e.g. ``US-NY``.
    """

    kind: Literal["report"]
    within_business_days: int = Field(default=2, ge=1)
    holidays: str = "US-NY"


class TurbidityRule(_Rule):
    """R2: turbidity contrast against background (rules.md R2).

    Attributes:
        criterion: ``washington`` (WAC 173-201A-200), ``california`` (CDFW table) or ``absolute``.
        absolute_limit_ntu: the limit for ``absolute`` (e.g. Maryland COMAR 26.08.02.03-3: 150).
        median_window_min: window length; windows aligned to multiples of it in event time (UTC).
        sustained_min: consecutive violating windows must cover this long.
        clear_min: consecutive compliant windows needed to clear (hysteresis).
        confirm_within_hours: due time of the SMO-confirmation work order (our choice).
    """

    kind: Literal["turbidity"]
    criterion: Literal["washington", "california", "absolute"] = "washington"
    absolute_limit_ntu: float = Field(default=150.0, gt=0)
    median_window_min: float = Field(default=5.0, gt=0)
    sustained_min: float = Field(default=15.0, gt=0)
    clear_min: float = Field(default=15.0, gt=0)
    confirm_within_hours: float = Field(default=24.0, gt=0)


class BasinRule(_Rule):
    """R3: cleanout when design capacity is reduced by 50 % by volume (rules.md R3).

    Attributes:
        cleanout_fraction: lost fraction of V(H) that makes a cleanout due.
        warning_fraction: lost fraction that raises an early warning.
        settle_readings: fewest readings in the settling window before a median is trusted.
        settle_minutes: settling window length (median over it).
        cleanout_within_hours: due time of the cleanout work order (the codes say "whenever";
            our default 72 h, Minnesota's practice).
        water_density_kg_m3: ρ for pressure-depth sensors (depth = P·10⁵/(ρ·g)).
    """

    kind: Literal["basin"]
    cleanout_fraction: float = Field(default=0.5, gt=0, le=1)
    warning_fraction: float = Field(default=0.4, gt=0, le=1)
    settle_readings: int = Field(default=3, ge=1)
    settle_minutes: float = Field(default=30.0, gt=0)
    cleanout_within_hours: float = Field(default=72.0, gt=0)
    water_density_kg_m3: float = Field(default=1000.0, gt=0)


AnyRule = Annotated[StormRule | RoutineRule | ReportRule | TurbidityRule | BasinRule, Field(discriminator="kind")]


class RulePack(BaseModel):
    """One jurisdiction's rules. ``rules`` maps rule id (``R1``, ``R1w``, ``R1r``, ``R2``, ``R3``) to rule."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    title: str = ""
    source: str = ""
    rules: dict[str, AnyRule] = Field(default_factory=dict)

    def _first(self, cls: type[_Rule]) -> tuple[str, Any] | None:
        for rule_id, rule in self.rules.items():
            if isinstance(rule, cls):
                return rule_id, rule
        return None

    def storm(self) -> tuple[str, StormRule] | None:
        """``(rule id, rule)`` of the storm rule, or ``None``."""
        return self._first(StormRule)

    def routine(self) -> tuple[str, RoutineRule] | None:
        return self._first(RoutineRule)

    def report(self) -> tuple[str, ReportRule] | None:
        return self._first(ReportRule)

    def turbidity(self) -> tuple[str, TurbidityRule] | None:
        return self._first(TurbidityRule)

    def basin(self) -> tuple[str, BasinRule] | None:
        return self._first(BasinRule)


class PackError(InputError):
    """A pack that cannot be loaded or an override that does not apply; names file and key."""


def _validation_message(source: str, exc: ValidationError, prefix: str = "") -> str:
    lines = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"])
        lines.append(f"{source}: {prefix}{loc}: {err['msg']}")
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
