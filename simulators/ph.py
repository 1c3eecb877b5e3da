"""Water chemistry of the simulated pH probe: mixing washout water into runoff, and the electrode.

The design: docs/simulators.md ("The modules", `simulators/ph.py`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

#: Ion product of water at 25 °C, (mol/L)² (pKw = 14.00).
KW_25C = 1.0e-14
#: Molar gas constant, J/(mol·K) (SI 2019, exact).
GAS_CONSTANT = 8.314462618
#: Faraday constant, C/mol (SI 2019: e·N_A, exact to these digits).
FARADAY = 96485.33212
#: 0 °C in kelvin.
ZERO_C_K = 273.15
#: The ideal electrode's isopotential point: 0 mV at pH 7.
ISOPOTENTIAL_PH = 7.0


def base_excess(ph: float) -> float:
    """Strong-base excess ``[OH⁻] − [H⁺]`` (mol/L) of an unbuffered water of pH ``ph`` (Kw at 25 °C)."""
    h = math.pow(10.0, -ph)
    return KW_25C / h - h


def ph_of_excess(excess: float) -> float:
    """The pH of an unbuffered water whose strong-base excess is ``excess`` mol/L.

    Solves ``x² + n·x − Kw = 0`` for x = [H⁺] > 0 in its cancellation-free form.
    """
    root = math.sqrt(excess * excess + 4.0 * KW_25C)
    h = 2.0 * KW_25C / (excess + root) if excess >= 0 else (root - excess) / 2.0
    return -math.log10(h)


def mix_ph(parts: Iterable[tuple[float, float]]) -> float:
    """The pH of a mix of waters given as ``(volume share, pH)`` pairs (shares summing to 1).

    Raises:
        ValueError: a negative share, or shares that do not sum to 1 (± 1e-9).
    """
    total = 0.0
    excess = 0.0
    for share, ph in parts:
        if share < 0:
            raise ValueError(f"volume share {share} is negative")
        total += share
        excess += share * base_excess(ph)
    if abs(total - 1.0) > 1e-9:
        raise ValueError(f"volume shares sum to {total}, not 1")
    return ph_of_excess(excess)


def nernst_slope_mv(temperature_c: float) -> float:
    """The ideal electrode's slope S(T) = ln(10)·R·T/F in mV per pH unit (59.16 at 25 °C)."""
    return math.log(10.0) * GAS_CONSTANT * (temperature_c + ZERO_C_K) / FARADAY * 1000.0


def electrode_potential_mv(ph: float, temperature_c: float) -> float:
    """An ideal glass electrode's potential (mV) in water of ``ph`` at ``temperature_c``:
    ``−S(T)·(pH − 7)`` (negative on the alkaline side)."""
    return -nernst_slope_mv(temperature_c) * (ph - ISOPOTENTIAL_PH)
