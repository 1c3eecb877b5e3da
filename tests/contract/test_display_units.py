"""Units and numbers in messages are written for people: ``3 tips``, never ``3 {tip}``; ``1000000``,
never ``1e+06`` (stormwatch.display)."""

from __future__ import annotations

from datetime import UTC, datetime

from stormwatch.contract import TIP_UNIT, Reading
from stormwatch.display import amount, number, unit_text
from stormwatch.stores.base import Conflict


def test_units_and_numbers_for_people() -> None:
    assert TIP_UNIT == "{tip}"  # the wire's UCUM annotation unit
    assert (unit_text(TIP_UNIT), unit_text(TIP_UNIT, 1), unit_text(TIP_UNIT, 3)) == ("tips", "tip", "tips")
    assert (unit_text("NTU"), unit_text("[pH]"), unit_text("cm")) == ("NTU", "[pH]", "cm")
    assert (amount(3, TIP_UNIT), amount(1, TIP_UNIT), amount(41.5, "NTU")) == ("3 tips", "1 tip", "41.5 NTU")
    assert [number(v) for v in (1e6, 1_000_000, 0.25, 7.9, 1e-5, 4000.5, -3.0, 0.0)] == [
        "1000000", "1000000", "0.25", "7.9", "0.00001", "4000.5", "-3", "0"]
    assert (number(1e308), number(1e-7)) == ("1e+308", "1e-07")  # absurd magnitudes keep the exponent


def test_a_conflict_of_rain_tips_names_tips() -> None:
    """The import's and ingest's conflicting_value line: ``rain_tips 3 tips ... holds 1 tip``."""
    at = datetime(2026, 6, 1, 12, tzinfo=UTC)
    r = Reading(site="s1", device="rain-1", quantity="rain_tips", value=3, unit=TIP_UNIT, time=at, gateway="import",
                boot="b", seq=7, tip_size="0.01 in")
    detail = Conflict(r, 1, TIP_UNIT, at).detail()
    assert detail == ("identity (gateway 'import', boot 'b', seq 7) is stored with 1 tip; this reading (rain-1 "
                      "rain_tips) says 3 tips: refused, the stored reading is kept")
    assert "{tip}" not in detail


def test_a_count_agrees_with_its_noun() -> None:
    from stormwatch.display import plural

    assert [plural(n, "cell") for n in (0, 1, 2)] == ["0 cells", "1 cell", "2 cells"]
    assert plural(1, "work order") == "1 work order" and plural(2, "entry", "entries") == "2 entries"


def test_a_conflict_never_names_the_stored_reading_by_the_refused_ones_device() -> None:
    """The stored reading of the identity may be another device's: the refused reading's device and
    quantity are said of the refused reading alone (a turbidity reading reusing a rain reading's
    seq once read "is stored with turb-up turbidity 0 tips")."""
    at = datetime(2026, 6, 1, 12, tzinfo=UTC)
    r = Reading(site="s1", device="turb-up", quantity="turbidity", value=10.0, unit="NTU", time=at, gateway="gw",
                boot="b", seq=1)
    detail = Conflict(r, 0, TIP_UNIT, datetime(2026, 6, 1, 11, 57, tzinfo=UTC)).detail()
    assert "turb-up turbidity 0 tips" not in detail
    assert detail == ("identity (gateway 'gw', boot 'b', seq 1) is stored with 0 tips at 2026-06-01T11:57:00+00:00; "
                      "this reading (turb-up turbidity) says 10 NTU at 2026-06-01T12:00:00+00:00: refused, the stored "
                      "reading is kept")
