"""Site configuration: errors name the file and the key; device roles must fit their profiles."""

from __future__ import annotations

from pathlib import Path

import pytest

from stormwatch.config import ConfigError, load_site
from stormwatch.profiles import ProfileLibrary
from tests.conftest import REPO
from tests.demo_support import EXAMPLE_SITE, example_doc, write_site


def test_example_site_loads_with_its_profiles() -> None:
    cfg = load_site(EXAMPLE_SITE, ProfileLibrary())
    assert cfg.site.id == "riverside-commons" and cfg.site.jurisdiction == "ch133"
    assert [d.id for d in cfg.devices] == ["rain-1", "turb-up", "turb-down", "basin-level"]
    assert cfg.basin is not None and cfg.basin.design_height == 4


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda d: d["devices"][2]["transport"].pop("port"), "devices.2.transport.modbus-rtu.port: Field required"),
        (lambda d: d["site"].update(timezone="America/Nowhere"), "site.timezone"),
        (lambda d: d.update(rain_gauge="rain-9"), "rain_gauge: no device 'rain-9'"),
        (lambda d: d["devices"][0].update(poll_interval_s=0), "devices.0.poll_interval_s"),
        (lambda d: d["devices"][1].update(profile="no_such_model"), "devices.1.profile: no profile 'no_such_model'"),
        (lambda d: d.update(unknown_key=1), "unknown_key: Extra inputs are not permitted"),
        # a YAML boolean is not a number (Python counts True as 1: a poll every second, stop bits 1)
        (lambda d: d["devices"][0].update(poll_interval_s=True),
         "devices.0.poll_interval_s: true is a yes/no value, not a number"),
        (lambda d: d["devices"][2]["transport"].update(stopbits=True),
         "devices.2.transport.modbus-rtu.stopbits: true is a yes/no value, not a number (YAML reads true/false"),
        (lambda d: d["devices"][0]["transport"].update(unit_id=False), "transport.modbus-tcp.unit_id: false is a "),
        (lambda d: d["basin"]["geometry"].update(side_slope_z=False), "basin.geometry.side_slope_z: false is a yes"),
        (lambda d: d["basin"].update(sensor_mount_height_ft=True), "basin.sensor_mount_height_ft: true is a yes/no"),
        # durations a clock can add: a poll at most daily, a reply timeout at most 10 minutes
        (lambda d: d["devices"][0].update(poll_interval_s=86_401),
         "devices.0.poll_interval_s: Input should be less than or equal to 86400 (device rain-1, line "),
        (lambda d: d["devices"][0]["transport"].update(timeout_s=1e9),
         "devices.0.transport.modbus-tcp.timeout_s: Input should be less than or equal to 600"),
        (lambda d: d["devices"][0]["transport"].update(timeout_s=float("nan")), "timeout_s: Input should be a finite"),
    ],
)
def test_errors_name_the_file_and_the_key(tmp_path: Path, mutate, expected: str) -> None:
    doc = example_doc()
    mutate(doc)
    path = write_site(tmp_path, doc)
    with pytest.raises(ConfigError) as err:
        load_site(path, ProfileLibrary())
    assert str(path) in str(err.value)
    assert expected in str(err.value)


def test_every_device_with_an_unknown_profile_is_named(tmp_path: Path) -> None:
    """Two typos are two problems in one error: each names its device, the search path once."""
    doc = example_doc()
    doc["devices"][0]["profile"] = "nope_gauge"
    doc["devices"][3]["profile"] = "nope_level"
    with pytest.raises(ConfigError) as err:
        load_site(write_site(tmp_path, doc), ProfileLibrary())
    msg = str(err.value)
    assert "devices.0.profile: no profile 'nope_gauge' (device rain-1, line " in msg
    assert "devices.3.profile: no profile 'nope_level' (device basin-level, line " in msg
    assert msg.count("known: ") == 1 and "yosemitech_y511" in msg
    assert "\n" not in msg


def test_a_broken_profile_says_why_once_and_names_each_device(tmp_path: Path) -> None:
    own = tmp_path / "profiles"
    own.mkdir()
    (own / "yosemitech_y511.yaml").write_text("model: yosemitech_y511\n")  # no protocol, no values
    doc = example_doc()
    with pytest.raises(ConfigError) as err:
        load_site(write_site(tmp_path, doc), ProfileLibrary(own))
    msg = str(err.value)
    assert msg.count(str(own / "yosemitech_y511.yaml")) == 1
    assert "(device turb-up, line " in msg
    assert ("devices.2.profile: profile 'yosemitech_y511' cannot be loaded (devices.1.profile says why) "
            "(device turb-down, line ") in msg


def test_roles_must_fit_the_profiles(tmp_path: Path) -> None:
    doc = example_doc()
    doc["rain_gauge"] = "turb-up"  # a turbidity probe does not count tips
    doc["turbidity_pair"]["upstream"] = "rain-1"  # a rain gauge does not report turbidity
    doc["basin"]["device"] = "turb-down"  # a turbidity probe is not a level sensor
    with pytest.raises(ConfigError) as err:
        load_site(write_site(tmp_path, doc), ProfileLibrary())
    msg = str(err.value)
    assert "rain_gauge: device 'turb-up' (yosemitech_y511) does not count tips" in msg
    assert "turbidity_pair.upstream: device 'rain-1' (tipping_bucket_modbus_counter) does not report turbidity" in msg
    assert "basin.device: device 'turb-down' (yosemitech_y511) is not a level sensor" in msg


def test_ntu_and_fnu_probes_are_not_a_pair(tmp_path: Path) -> None:
    doc = example_doc()
    doc["devices"][2]["profile"] = "ysi_exo_turbidity"  # reports FNU (ISO 7027), upstream reports NTU
    with pytest.raises(ConfigError, match="upstream reports NTU but downstream FNU"):
        load_site(write_site(tmp_path, doc), ProfileLibrary())


def test_distance_down_sensor_needs_its_mount_height(tmp_path: Path) -> None:
    doc = example_doc()
    del doc["basin"]["sensor_mount_height_ft"]
    with pytest.raises(ConfigError, match=r"basin\.sensor_mount_height_ft: required"):
        load_site(write_site(tmp_path, doc), ProfileLibrary())


def test_a_key_written_twice_is_refused_with_both_lines(tmp_path: Path) -> None:
    """PyYAML keeps the last of a repeated key silently; the loader of site files, profiles and
    packs (stormwatch.errors.load_yaml) refuses it, naming the key and both lines."""
    text = EXAMPLE_SITE.read_text()
    path = tmp_path / "site.yaml"
    path.write_text(text.replace("site:\n", "site:\n  id: riverside-north\n", 1))
    line = text.splitlines().index("site:") + 2  # the line added; the example's own id is the next one
    with pytest.raises(ConfigError) as err:
        load_site(path, ProfileLibrary())
    assert str(err.value) == (f"{path}:{line + 1}:3: not valid YAML: key 'id' given twice, at lines {line} and "
                              f"{line + 1} (YAML would keep only the last; remove one)")


def test_a_merge_key_is_not_a_repeated_key(tmp_path: Path) -> None:
    from stormwatch.errors import load_yaml

    path = tmp_path / "merge.yaml"
    path.write_text("base: &b {x: 1, y: 2}\nm:\n  <<: *b\n  x: 3\n")
    assert load_yaml(path) == {"base": {"x": 1, "y": 2}, "m": {"x": 3, "y": 2}}


def test_a_profile_with_a_key_written_twice_is_refused(tmp_path: Path) -> None:
    from stormwatch.profiles import ProfileError, load_profile_file

    source = REPO / "device_profiles" / "campbell_rainvue10.yaml"
    text = source.read_text()
    first = text.splitlines()[next(i for i, t in enumerate(text.splitlines()) if t.startswith("model:"))]
    path = tmp_path / "campbell_rainvue10.yaml"
    path.write_text(text.replace(first + "\n", f"{first}\n{first}\n", 1))
    with pytest.raises(ProfileError, match=r"not valid YAML: key 'model' given twice, at lines \d+ and \d+"):
        load_profile_file(path)


@pytest.mark.parametrize(("old", "new", "expected"), [
    ("  baud: 9600\n", "  baud: 12345\n", "serial_line.baud: 12345 is not a standard baud rate (the common ones: 1200"),
    ("  baud: 9600\n", "  baud: 9600\n  stopbits: true\n",
     "serial_line.stopbits: true is a yes/no value, not a number (YAML reads true/false, yes/no and on/off so)"),
    ("  baud: 9600\n", "  baud: on\n", "serial_line.baud: true is a yes/no value, not a number"),  # YAML 1.1: on
])
def test_a_profile_number_is_a_number(tmp_path: Path, old: str, new: str, expected: str) -> None:
    """Device profiles are read by every command that loads a site file: the same rules for numbers."""
    from stormwatch.profiles import ProfileError, load_profile_file

    text = (REPO / "device_profiles" / "maxbotix_hrxl.yaml").read_text()
    assert text.count(old) == 1
    path = tmp_path / "maxbotix_hrxl.yaml"
    path.write_text(text.replace(old, new))
    with pytest.raises(ProfileError) as err:
        load_profile_file(path)
    assert expected in str(err.value)
