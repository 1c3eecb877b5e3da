"""The ``enforcement:`` section of a rule pack: what a village code prescribes after a violation.

The notice of violation's required contents in the code's order, the clocks (appeal, hearing,
decision, correction, payment) in calendar or business days, who hears an appeal, the stop-work
order, the penalty ladder with its look-back window and continuation unit, and the lien. Every
value carries the code's citation and its words (``quote``/``text``, verbatim from the pack's
``source``: tests/alerts/test_enforcement_pack.py holds every quote to the text). A value our copy
of the code does not confirm is written ``{value: ..., verified: false, note: "why"}``, as rule
parameters are (:mod:`stormwatch.alerts.packs`), and is shown marked wherever it is used.

The section is validated when the pack loads, like the rules. The desk that uses it is
:mod:`stormwatch.enforcement`; the workflow and each clock with its citation: docs/enforcement.md.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

#: What starts a clock: an action recorded on the case (docs/enforcement.md, "Clocks").
ClockStart = Literal["issued", "served", "appeal_filed", "decision", "stop_work_served", "stop_work_appeal_filed",
                     "costs_billed"]

#: The clocks a section may set, each named for what is due when it runs out.
ClockName = Literal["appeal", "hearing", "decision_mailed", "correction_after_decision", "stop_work_appeal",
                    "stop_work_hearing", "payment"]

#: The required contents of a notice a section may list (the letter fills each from the case).
ContentKey = Literal["party", "location", "nature", "remedy", "penalty", "appeal", "abatement"]


def _marked(where: str, entry: Any) -> Any:
    """``entry`` with ``{value:, verified:, note:}`` values unwrapped and the unconfirmed ones named
    in ``unverified`` (the rule packs' convention)."""
    if not isinstance(entry, dict):
        return entry
    out: dict[str, Any] = {}
    unverified = dict(entry.get("unverified") or {})
    for key, value in entry.items():
        if key == "unverified":
            continue
        if isinstance(value, dict) and "value" in value and set(value) <= {"value", "verified", "note"}:
            verified = value.get("verified", True)
            if not isinstance(verified, bool):
                raise ValueError(f"{where}{key}.verified: true or false, not {verified!r}")
            if not verified:
                unverified[key] = str(value.get("note") or "not confirmed by the code text in hand")
            value = value["value"]
        out[key] = value
    if unverified:
        out["unverified"] = unverified
    return out


class _Part(BaseModel):
    """A part of the section: strict, frozen, with the ``unverified`` notes of its values."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    unverified: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _unwrap(cls, data: Any) -> Any:
        return _marked("", data)


class Content(_Part):
    """One required content of the notice: ``key`` says what the letter fills in, ``text`` is the code's words."""

    key: ContentKey
    citation: str = Field(min_length=1)
    text: str = Field(min_length=1)


class Notice(_Part):
    """The notice of violation.

    Attributes:
        citation: the section (``Ch. 133 §133-10A``).
        title: the letter's title (Ch. 507: "Notice of violation and order to correct").
        issued_by: who issues it, in the code's words (``the Village``, ``the SMO``).
        addressed_to: to whom, in the code's words.
        quote: the sentence that authorizes it.
        contents: the required contents in the code's order.
        cut_off: what our copy of the code lacks after the last content ("" when it is whole).
    """

    citation: str = Field(min_length=1)
    title: str = "Notice of violation"
    issued_by: str = Field(min_length=1)
    addressed_to: str = Field(min_length=1)
    quote: str = Field(min_length=1)
    contents: tuple[Content, ...] = Field(min_length=1)
    cut_off: str = ""

    @model_validator(mode="after")
    def _each_once(self) -> Notice:
        keys = [c.key for c in self.contents]
        twice = sorted({k for k in keys if keys.count(k) > 1})
        if twice:
            raise ValueError(f"contents: {', '.join(twice)} listed twice")
        return self


class Clock(_Part):
    """A deadline the code sets: ``days`` calendar or business days after the action ``start``.

    YAML writes the start as ``from:``. Business days skip Saturdays, Sundays and the section's
    ``holidays``; the first day counted is the day after ``start`` (docs/enforcement.md, "Counting days").
    """

    start: ClockStart = Field(alias="from")
    days: int = Field(ge=1, le=3650)
    unit: Literal["calendar", "business"] = "calendar"
    citation: str = Field(min_length=1)
    quote: str = Field(min_length=1)


class Appeal(_Part):
    """Who hears an appeal (``to``, in the code's words) and where the code says so."""

    to: str = Field(min_length=1)
    citation: str = Field(min_length=1)
    quote: str = Field(min_length=1)


class StopWork(_Part):
    """The stop-work order.

    Attributes:
        by_notice: receiving a notice of violation itself halts the work (Spencerport D).
        lift_in_writing: the order ends only when the village confirms compliance *in writing*: a
            lift is recorded with the written confirmation's reference.
        quote: the code's words (what halts, until when).
    """

    citation: str = Field(min_length=1)
    quote: str = Field(min_length=1)
    by_notice: bool = False
    lift_in_writing: bool = False


class Tier(_Part):
    """One step of the penalty ladder: the ``offense``-th (the last tier holds for every later one)."""

    offense: int = Field(ge=1, le=20)
    fine_min_usd: int | None = Field(default=None, ge=0)
    fine_max_usd: int | None = Field(default=None, ge=0)
    text: str = Field(min_length=1)


class Penalty(_Part):
    """Fines by offense, the look-back window and the continuation unit.

    Attributes:
        window_years: offenses count together when "committed within a period of" this many years
            (``None``: the code has no ladder, every offense is the first tier).
        tiers: first, second, ... offense (at least one).
        continuation: ``week`` or ``day``: each such period the violation continues is a separate
            (additional) violation; ``None``: the code says nothing (or our copy lacks it).
        continuation_quote, continuation_citation: the code's words for it.
    """

    citation: str = Field(min_length=1)
    window_years: int | None = Field(default=None, ge=1, le=50)
    tiers: tuple[Tier, ...] = Field(min_length=1)
    continuation: Literal["week", "day"] | None = None
    continuation_citation: str = ""
    continuation_quote: str = ""

    @model_validator(mode="after")
    def _ordered(self) -> Penalty:
        if [t.offense for t in self.tiers] != list(range(1, len(self.tiers) + 1)):
            raise ValueError("tiers: offenses must be 1, 2, 3, ... in order")
        if self.continuation is not None and not (self.continuation_citation and self.continuation_quote):
            raise ValueError("continuation needs its continuation_citation and continuation_quote")
        return self

    def tier(self, offense: int) -> Tier:
        """The tier of the ``offense``-th offense (the last tier for any later one)."""
        return self.tiers[min(offense, len(self.tiers)) - 1]


class Lien(_Part):
    """Work done by the village charged to the violator and a lien if unpaid (``unpaid_days``
    after billing; ``None``: the code gives no period)."""

    citation: str = Field(min_length=1)
    quote: str = Field(min_length=1)
    unpaid_days: int | None = Field(default=None, ge=1, le=3650)


class EnforcementSection(_Part):
    """A pack's ``enforcement:`` section (module docstring).

    Attributes:
        source: the code text the quotes come from (docs/reference/ordinances/...).
        holidays: ``<country>-<subdivision>`` whose public holidays are not business days (python-holidays).
        enforcer: who acts for the village, in the code's words ("the Superintendent", "the SMO").
        notice: the notice of violation.
        appeal: who hears an appeal of the notice (``None``: the code provides none).
        stop_work: the stop-work order (``None``: the code has none, or our copy lacks it).
        stop_work_appeal: who hears an appeal of a stop-work order.
        clocks: each deadline the code sets (several for one name: the earliest is tracked, all cited).
        silent: a deadline the code does not set -> what it says instead (shown on the case).
        penalty, lien: see :class:`Penalty`, :class:`Lien`.
    """

    source: str = Field(min_length=1)
    holidays: str = "US-NY"
    enforcer: str = Field(min_length=1)
    notice: Notice
    appeal: Appeal | None = None
    stop_work: StopWork | None = None
    stop_work_appeal: Appeal | None = None
    clocks: dict[ClockName, tuple[Clock, ...]] = Field(default_factory=dict)
    silent: dict[ClockName, str] = Field(default_factory=dict)
    penalty: Penalty | None = None
    lien: Lien | None = None

    @model_validator(mode="after")
    def _consistent(self) -> EnforcementSection:
        for name, clocks in self.clocks.items():
            if not clocks:
                raise ValueError(f"clocks.{name}: at least one clock (or name it under silent:)")
            if name in self.silent:
                raise ValueError(f"clocks.{name}: also listed under silent")
        if "stop_work_appeal" in self.clocks and self.stop_work_appeal is None:
            raise ValueError("clocks.stop_work_appeal: needs stop_work_appeal (who hears it)")
        if "appeal" in self.clocks and self.appeal is None:
            raise ValueError("clocks.appeal: needs appeal (who hears it)")
        return self

    def unverified_notes(self) -> list[str]:
        """Every value of the section our copy does not confirm: ``"where: note"``, in section order."""
        out = [f"{k}: {v}" for k, v in self.unverified.items()]
        parts: list[tuple[str, _Part | None]] = [("notice", self.notice), ("appeal", self.appeal),
                                                 ("stop_work", self.stop_work), ("penalty", self.penalty),
                                                 ("lien", self.lien)]
        parts += [(f"notice.contents.{c.key}", c) for c in self.notice.contents]
        parts += [(f"clocks.{n}", c) for n, cs in self.clocks.items() for c in cs]
        if self.penalty is not None:
            parts += [(f"penalty.tiers.{t.offense}", t) for t in self.penalty.tiers]
        for where, part in parts:
            if part is not None:
                out += [f"{where}.{k}: {v}" for k, v in part.unverified.items()]
        return out
