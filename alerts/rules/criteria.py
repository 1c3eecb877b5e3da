"""Numeric turbidity criteria that make the narrative standard operational (rules.md R2).

Law: Ch. 133 §133-6C / Ch. 196 §196-8C -- "no ... increase in turbidity that will result in
substantial visible contrast to natural conditions". The codes give no number; a site picks one
of these criteria (pack ``criterion``). Each is a function ``(background_ntu, downstream_ntu) ->
allowed maximum`` and a violation is ``downstream > allowed``.

* ``washington`` -- WAC 173-201A-200: ≤ 5 NTU over background when background ≤ 50 NTU;
  ≤ 10 % increase when background > 50 NTU.
* ``california`` -- CDFW streambed agreements: background < 1 NTU → ≤ 2 NTU; 1–5 → +1 NTU;
  5–50 → +20 %; 50–100 → +10 NTU; > 100 → +10 % (band edges inclusive at the upper end).
* ``absolute`` -- a fixed limit regardless of background (e.g. Maryland COMAR 26.08.02.03-3:
  150 NTU at any time); background is then not needed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class Criterion(Protocol):
    """A turbidity criterion (read-only: the criteria are frozen dataclasses)."""

    @property
    def name(self) -> str:
        """Criterion name (``washington``, ``california``, ``absolute``)."""
        ...

    @property
    def needs_background(self) -> bool:
        """Whether :meth:`allowed_ntu` needs the upstream background."""
        ...

    @property
    def label(self) -> str:
        """What the criterion allows, in words a person reads (``background + 5 NTU, + 10 % above
        50 NTU``): the SMO-facing name of the method, never its code name."""
        ...

    def allowance(self, background_ntu: float | None) -> str:
        """The part of :attr:`label` in effect at this background (``background + 5 NTU``)."""
        ...

    def allowed_ntu(self, background_ntu: float | None) -> float:
        """Highest compliant downstream turbidity for this background (NTU)."""
        ...


@dataclass(frozen=True)
class Washington:
    """WAC 173-201A-200 (see module docstring)."""

    name: str = "washington"
    needs_background: bool = True
    label: str = "background + 5 NTU (background ≤ 50 NTU), else + 10 %"

    def allowed_ntu(self, background_ntu: float | None) -> float:
        assert background_ntu is not None
        if background_ntu <= 50.0:
            return background_ntu + 5.0
        return background_ntu + background_ntu / 10.0

    def allowance(self, background_ntu: float | None) -> str:
        return "background + 5 NTU" if background_ntu is None or background_ntu <= 50.0 else "background + 10 %"


@dataclass(frozen=True)
class California:
    """CDFW streambed-agreement table (see module docstring)."""

    name: str = "california"
    needs_background: bool = True
    label: str = "CDFW bands: 2 NTU below a 1 NTU background, + 1 NTU to 5, + 20 % to 50, + 10 NTU to 100, + 10 %"

    def allowance(self, background_ntu: float | None) -> str:
        b = background_ntu
        if b is None:
            return self.label
        if b < 1.0:
            return "at most 2 NTU (background < 1 NTU)"
        if b <= 5.0:
            return "background + 1 NTU"
        if b <= 50.0:
            return "background + 20 %"
        return "background + 10 NTU" if b <= 100.0 else "background + 10 %"

    def allowed_ntu(self, background_ntu: float | None) -> float:
        assert background_ntu is not None
        b = background_ntu
        if b < 1.0:
            return 2.0
        if b <= 5.0:
            return b + 1.0
        if b <= 50.0:
            return b * 1.20
        if b <= 100.0:
            return b + 10.0
        return b * 1.10


@dataclass(frozen=True)
class Absolute:
    """A fixed downstream limit in NTU."""

    limit_ntu: float
    name: str = "absolute"
    needs_background: bool = False

    @property
    def label(self) -> str:
        return f"at most {self.limit_ntu:g} NTU at any background"

    def allowance(self, background_ntu: float | None) -> str:
        return f"at most {self.limit_ntu:g} NTU"

    def allowed_ntu(self, background_ntu: float | None) -> float:
        return self.limit_ntu


def criterion_named(name: str, absolute_limit_ntu: float = 150.0) -> Criterion:
    """The criterion called ``name`` (``washington``, ``california``, ``absolute``).

    Raises:
        ValueError: unknown name.
    """
    if name == "washington":
        return Washington()
    if name == "california":
        return California()
    if name == "absolute":
        return Absolute(absolute_limit_ntu)
    raise ValueError(f"unknown turbidity criterion {name!r} (washington, california, absolute)")
