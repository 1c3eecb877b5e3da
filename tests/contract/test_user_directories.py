"""Users' own profiles and packs (issue 10 item 2): directories named by ``--profiles``/``--packs``
or ``STORMWATCH_PROFILES``/``STORMWATCH_PACKS`` are searched before the built-ins
(stormwatch/resources.py ``search_path``: the option first, then the variable, then the package),
so a user file of a built-in's name replaces it; ``profiles list`` / ``packs list`` show where each
comes from, and a file that cannot load says BROKEN and why.

The pack that replaces ch133 here differs in one number: a 1.0-in threshold instead of 0.5 in. On
the Tharandt record (0.2-mm tips) 1.0 in is ceil(25.4 / 0.2) = 127 tips; of the 15 storms that
reach 64 tips under the built-in pack (found by hand in tests/importers/test_replay.py ``storms_by_hand``),
4 reach 127 (135, 132, 143 and 185 tips)."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from stormwatch import resources
from stormwatch.alerts.packs import load_pack
from stormwatch.app.cli import app
from stormwatch.profiles import ProfileLibrary
from tests.conftest import data_file
from tests.importers_support import THARANDT, storms_by_hand, tharandt_tips

THARANDT_ARGS = ["--delimiter", ";", "--time-format", "%d.%m.%Y %H:%M", "--tip-mm", "0.2"]
TIPS_FOR_ONE_INCH = 127  # 127 × 0.2 mm = 25.4 mm = 1.0 in; 126 × 0.2 = 25.2 mm < 1.0 in


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The variables as a user without them has them; restored after the test (the root command
    puts --profiles/--packs first on them, in this process)."""
    for variable in (resources.PROFILES_ENV, resources.PACKS_ENV):
        monkeypatch.setenv(variable, "")  # recorded, so the end of the test restores the variable...
        monkeypatch.delenv(variable)  # ...whatever the command put there (delenv of an unset one records nothing)


def _pack(directory: Path, threshold: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    text = (resources.builtin_packs_dir() / "ch133.yaml").read_text(encoding="utf-8")
    assert 'threshold_in: "0.5"' in text
    path = directory / "ch133.yaml"
    path.write_text(text.replace('threshold_in: "0.5"', f'threshold_in: "{threshold}"'), encoding="utf-8")
    return path


def _profile(directory: Path, upper: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    text = (resources.builtin_profiles_dir() / "yosemitech_y511.yaml").read_text(encoding="utf-8")
    assert "valid_range: [0.0, 1000.0]" in text
    path = directory / "yosemitech_y511.yaml"
    path.write_text(text.replace("valid_range: [0.0, 1000.0]", f"valid_range: [0.0, {upper}]"), encoding="utf-8")
    return path


def _threshold(directory: Path | None = None) -> str:
    """R1's threshold (in) of the ch133 the search path finds."""
    return str(load_pack("ch133", directory=directory).rules["R1"].threshold_in)  # type: ignore[attr-defined]


def _turbidity_range(library: ProfileLibrary) -> tuple[float, float] | None:
    """The valid range of the Y511's turbidity point in the profile the library finds."""
    modbus = library.get("yosemitech_y511").modbus
    assert modbus is not None
    (point,) = [p for p in modbus.points if p.quantity == "turbidity"]
    return point.valid_range


def _listing(*args: str, env: dict[str, str] | None = None, broken: int = 0) -> dict[str, list[str]]:
    """The listing by name; ``broken``: how many entries must be BROKEN (then exit 2 and one error line)."""
    result = CliRunner().invoke(app, list(args), env=env, catch_exceptions=False)
    assert result.exit_code == (2 if broken else 0), result.output
    lines = result.output.splitlines()
    errors = [line for line in lines if line.startswith("error: ")]
    what = {"profiles": "device profiles", "packs": "rule packs"}[args[-2]]
    expected = [f"error: {broken} of the {len(lines) - 1} {what} cannot be used (BROKEN above)"] if broken else []
    assert errors == expected, result.output
    return {line.split()[0]: line.split(None, 3)[1:] for line in lines if not line.startswith("error: ")}


def test_the_option_beats_the_variable_beats_the_built_in_for_packs(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    builtin = resources.builtin_packs_dir() / "ch133.yaml"
    from_env = _pack(tmp_path / "env-packs", "0.8")
    from_option = _pack(tmp_path / "option-packs", "1.0")
    assert _threshold() == "0.5"
    monkeypatch.setenv(resources.PACKS_ENV, str(from_env.parent))
    assert _threshold() == "0.8"
    assert _threshold(from_option.parent) == "1.0"

    listed = _listing("--packs", str(from_option.parent), "packs", "list")
    origin, path, rest = listed["ch133"]
    assert (origin, path) == ("user", str(from_option))
    assert rest == f"(replaces {from_env}, {builtin})"
    assert listed["ch196"][:2] == ["built-in", str(resources.builtin_packs_dir() / "ch196.yaml")]


def test_a_user_pack_changes_what_replay_finds(tmp_path: Path) -> None:
    """The user's ch133 (1.0 in) is the one the rules run: 4 storms instead of 15."""
    gap = timedelta(hours=6)
    closed, _ = storms_by_hand(tharandt_tips(), gap)
    assert sum(s.tips >= 64 for s in closed) == 15
    expected = sorted(s.tips for s in closed if s.tips >= TIPS_FOR_ONE_INCH)
    assert expected == [132, 135, 143, 185]
    user = _pack(tmp_path / "packs", "1.0")
    result = CliRunner().invoke(app, ["--packs", str(user.parent), "replay", str(data_file(THARANDT)), *THARANDT_ARGS,
                                      "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    events = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert sorted(e["tips"] for e in events if e["kind"] == "storm_inspection_due") == expected


def test_the_variable_beats_the_built_in_for_profiles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    builtin = resources.builtin_profiles_dir() / "yosemitech_y511.yaml"
    user = _profile(tmp_path / "profiles", "500.0")
    assert _turbidity_range(ProfileLibrary()) == (0.0, 1000.0)
    monkeypatch.setenv(resources.PROFILES_ENV, str(user.parent))
    assert _turbidity_range(ProfileLibrary()) == (0.0, 500.0)
    listed = _listing("profiles", "list")
    assert listed["yosemitech_y511"] == ["user", str(user), f"(replaces {builtin})"]
    assert listed["keller_acculevel"] == ["built-in", str(resources.builtin_profiles_dir() / "keller_acculevel.yaml")]
    # the option, searched before the variable
    first = _profile(tmp_path / "first", "400.0")
    listed = _listing("--profiles", str(first.parent), "profiles", "list")
    assert listed["yosemitech_y511"] == ["user", str(first), f"(replaces {user}, {builtin})"]


def test_a_pack_or_profile_that_cannot_load_is_listed_as_broken_with_the_reason(tmp_path: Path) -> None:
    packs = tmp_path / "packs"
    packs.mkdir()
    text = (resources.builtin_packs_dir() / "ch133.yaml").read_text(encoding="utf-8")
    (packs / "ch999.yaml").write_text(text.replace("name: ch133", "name: ch998"), encoding="utf-8")
    (packs / "broken.yaml").write_text("name: [broken\n", encoding="utf-8")
    listed = _listing("--packs", str(packs), "packs", "list", broken=2)
    assert listed["ch999"] == ["user", str(packs / "ch999.yaml"),
                               "BROKEN: name: 'ch998' must equal the file name 'ch999'"]
    assert listed["broken"][0] == "user" and listed["broken"][2].startswith("BROKEN: ")
    assert "not valid YAML" in listed["broken"][2]
    assert all(len(v) == 2 for k, v in listed.items() if k not in ("ch999", "broken"))  # the rest load

    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / "acme_nothing.yaml").write_text("model: acme_nothing\n", encoding="utf-8")
    listed = _listing("--profiles", str(profiles), "profiles", "list", broken=1)
    assert listed["acme_nothing"][0] == "user" and listed["acme_nothing"][2].startswith("BROKEN: ")


def test_a_file_that_is_no_profile_or_pack_is_named_so_and_fails_nothing(tmp_path: Path) -> None:
    """A site file and binary data in a profile or pack directory are not BROKEN profiles: each is
    listed as not one (and why), and the listing exits 0 -- unless such a file hides a built-in of
    its name (then it is BROKEN: the library would read it)."""
    from stormwatch.resources import example_site

    for option, command, what in (("--profiles", "profiles", "DEVICE PROFILE"), ("--packs", "packs", "RULE PACK")):
        user = tmp_path / command
        user.mkdir()
        (user / "site.yaml").write_text(example_site().read_text(encoding="utf-8"), encoding="utf-8")
        (user / "blob.yaml").write_bytes(b"\x7fELF\x02\x01" + bytes(64))
        listed = _listing(option, str(user), command, "list")
        assert listed["site"] == ["user", str(user / "site.yaml"),
                                  f"NOT A {what}: a site file (site:, devices:) (ignored; move it out of {user})"]
        assert listed["blob"][2] == f"NOT A {what}: binary data (ignored; move it out of {user})"
    hiding = tmp_path / "hiding"
    hiding.mkdir()
    (hiding / "maxbotix_hrxl.yaml").write_text(example_site().read_text(encoding="utf-8"), encoding="utf-8")
    listed = _listing("--profiles", str(hiding), "profiles", "list", broken=1)
    assert listed["maxbotix_hrxl"][2].startswith("(replaces ") and "BROKEN: " in listed["maxbotix_hrxl"][2]
