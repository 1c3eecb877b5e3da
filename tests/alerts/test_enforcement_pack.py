"""The enforcement sections of the village packs: every word quoted is the code's, and a bad section
is refused at load with its file and key, like a bad rule."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from stormwatch.alerts.packs import PackError, load_pack

REPO = Path(__file__).resolve().parents[2]
VILLAGES = ("ch133", "ch196", "ch507", "spencerport")


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def _quotes(section: object) -> list[str]:
    """Every ``quote`` and ``text`` string of the section's YAML, wherever it sits."""
    out: list[str] = []
    if isinstance(section, dict):
        for key, value in section.items():
            if key in ("quote", "text", "continuation_quote") and isinstance(value, str):
                out.append(value)
            else:
                out += _quotes(value)
    elif isinstance(section, list):
        for item in section:
            out += _quotes(item)
    return out


@pytest.mark.parametrize("name", VILLAGES)
def test_every_quote_is_verbatim_in_the_code_text(name: str) -> None:
    doc = yaml.safe_load((REPO / "alerts" / "packs" / f"{name}.yaml").read_text(encoding="utf-8"))
    source = _flat((REPO / doc["enforcement"]["source"]).read_text(encoding="utf-8"))
    quotes = _quotes(doc["enforcement"])
    assert len(quotes) >= 4
    for quote in quotes:
        for part in quote.split("[…]"):  # an elision skips a page header of the copy
            assert _flat(part) in source, f"{name}: not in {doc['enforcement']['source']}: {part!r}"


@pytest.mark.parametrize("name", VILLAGES)
def test_every_village_pack_has_an_enforcement_section(name: str) -> None:
    section = load_pack(name).enforcement
    assert section is not None and section.notice.contents and section.holidays == "US-NY"


def test_permits_have_none() -> None:
    assert load_pack("epa-cgp-2022").enforcement is None


def test_a_bad_section_names_the_file_and_key(tmp_path: Path) -> None:
    doc = yaml.safe_load((REPO / "alerts" / "packs" / "ch133.yaml").read_text(encoding="utf-8"))
    doc["name"] = "bad"
    doc["enforcement"]["clocks"]["hearing"][0]["unit"] = "fortnight"
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(doc), encoding="utf-8")
    with pytest.raises(PackError, match=r"bad\.yaml: enforcement\.clocks\.hearing\.0\.unit: Input should be "
                                        r"'calendar' or 'business'"):
        load_pack("bad", directory=tmp_path)
    doc["enforcement"]["clocks"]["hearing"][0]["unit"] = "calendar"
    doc["enforcement"]["penalty"]["tiers"][0]["fine_max_usd"] = {"value": None, "verified": "maybe"}
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(doc), encoding="utf-8")
    with pytest.raises(PackError, match=r"fine_max_usd\.verified: true or false"):
        load_pack("bad", directory=tmp_path)
