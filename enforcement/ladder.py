"""The penalty a code sets for an offense: its place on the ladder and the continuing violation.

* Offense number: a party's offenses count together when "committed within a period of five years"
  (Ch. 133 §133-10D, Ch. 196 §196-12F): the offenses of the same party under the same code whose
  violation day lies in the five years up to this one's (that day five years earlier included; a
  29 February looks back to 1 March), plus this one. Two offenses of one day are ordered by case id.
* Tier: the fine of that offense (the last tier for any later one). A fine our copy of the code
  does not confirm (Ch. 196's "$1,0") is shown as found and marked unverified, never filled in.
* Continuation: each whole week (Ch. 133, Ch. 196) or each day (Spencerport) from service of the
  notice to the verified correction is a separate violation: served 2026-06-03, correction verified
  2026-07-01 -> 28 days -> 4 weeks, or 28 days (06-03 through 06-30).

Design and citations: docs/enforcement.md, "Penalties".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date

from stormwatch.alerts.enforcement_pack import Penalty, Tier

_ORDINAL = {1: "first", 2: "second", 3: "third", 4: "fourth", 5: "fifth", 6: "sixth", 7: "seventh", 8: "eighth",
            9: "ninth", 10: "tenth"}


_WORDS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight", 9: "nine", 10: "ten"}


def ordinal(n: int) -> str:
    """``first``, ``second``, ... (``11th`` beyond ten)."""
    return _ORDINAL.get(n, f"{n}th")


def years_before(day: date, years: int) -> date:
    """The same day ``years`` earlier (29 February: 1 March, the shorter look-back)."""
    try:
        return day.replace(year=day.year - years)
    except ValueError:
        return date(day.year - years, 3, 1)


@dataclass(frozen=True)
class Offense:
    """The place of one offense on its code's ladder.

    Attributes:
        number: 1 for a first offense, ...
        prior: ``(case id, violation day)`` of the earlier offenses counted, oldest first.
        window_start: the first day of the look-back (``None``: the code has no ladder).
        tier: the fine of this offense.
    """

    number: int
    prior: tuple[tuple[str, date], ...]
    window_start: date | None
    tier: Tier


def offense_of(case_id: str, day: date, offenses: Sequence[tuple[str, date]], penalty: Penalty) -> Offense:
    """The place of case ``case_id`` (violation day ``day``) among ``offenses`` -- every offense of the
    same party under the same code, ``(case id, violation day)``, the case itself may be among them."""
    if penalty.window_years is None:
        return Offense(1, (), None, penalty.tier(1))
    start = years_before(day, penalty.window_years)
    prior = tuple(sorted(((cid, d) for cid, d in offenses
                          if cid != case_id and start <= d and (d, cid) < (day, case_id)), key=lambda p: (p[1], p[0])))
    return Offense(len(prior) + 1, prior, start, penalty.tier(len(prior) + 1))


def usd(amount: int) -> str:
    """``$10,000``."""
    return f"${amount:,}"


def fine_text(tier: Tier) -> str:
    """The fine of ``tier`` in a few words: what the code confirms, and what it does not."""
    low, high = tier.fine_min_usd, tier.fine_max_usd
    cut = tier.unverified.get("fine_max_usd")
    if cut is not None:
        top = f"a maximum our copy does not give (UNVERIFIED: {cut})"
        return f"not less than {usd(low)} and {top}" if low is not None else top
    if low is not None and high is not None:
        return f"{usd(low)} to {usd(high)}"
    if high is not None:
        return f"up to {usd(high)}"
    if low is not None:
        return f"not less than {usd(low)} (the code sets no maximum)"
    return "no amount in the code"


def penalty_statement(penalty: Penalty, offense: Offense) -> str:
    """The notice's statement of the penalty: which offense this is, the code's words, the fine."""
    tier = offense.tier
    words = f'{penalty.citation}: "{tier.text}". Fine: {fine_text(tier)}.'
    if penalty.window_years is None:
        return words
    prior = "; ".join(f"{cid} of {d.isoformat()}" for cid, d in offense.prior) or "none"
    since = offense.window_start.isoformat() if offense.window_start else "-"
    years = _WORDS.get(penalty.window_years, str(penalty.window_years))
    return (f"This is a {ordinal(offense.number)} offense within {years} years (earlier offenses since {since}: "
            f"{prior}). {words}")


@dataclass(frozen=True)
class Continuation:
    """The separate violations a continuing violation adds: ``count`` whole ``unit``\\ s from
    ``start`` (service) to ``end`` (verified correction, or today while it continues)."""

    unit: str
    count: int
    start: date
    end: date
    corrected: bool


def continuation(penalty: Penalty | None, served: date | None, corrected: date | None,
                 today: date) -> Continuation | None:
    """The continuing violation of a notice served on ``served`` (``None`` when the code sets no
    unit or nothing was served)."""
    if penalty is None or penalty.continuation is None or served is None:
        return None
    end = corrected or today
    days = max(0, (end - served).days)
    count = days // 7 if penalty.continuation == "week" else days
    return Continuation(penalty.continuation, count, served, end, corrected is not None)


def continuation_text(penalty: Penalty, c: Continuation) -> str:
    """``4 additional weekly violations (served 2026-06-03, corrected 2026-07-01; Ch. 133 §133-10D)``."""
    what = {"week": "additional weekly violation", "day": "separate daily offense"}[c.unit]
    plural = "" if c.count == 1 else "s"
    until = f"correction verified {c.end.isoformat()}" if c.corrected else f"not corrected as of {c.end.isoformat()}"
    return f"{c.count} {what}{plural} (served {c.start.isoformat()}, {until}; {penalty.continuation_citation})"

