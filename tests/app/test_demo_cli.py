"""``stormwatch demo``: every bad input is refused up front with one clear line and exit code 2."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from stormwatch import resources
from stormwatch.app.cli import app
from stormwatch.app.demo import influx_store_url
from tests.conftest import data_file

runner = CliRunner()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--storm-depth-in", "1e400"], "storm depth must be > 0 and <= 72 in"),
        (["--storm-depth-in", "abc"], "is not a decimal number of inches"),
        (["--storm-depth-in", "-1"], "storm depth must be > 0"),
        (["--broker", "foo://x"], "broker URL must start with mqtt:// or mqtts://"),
        (["--influx", "ftp://x"], "--influx ftp://x: unknown store URL scheme 'ftp'; accepted: sqlite:///"),
        (["--store", "ftp://x"], "--store ftp://x: unknown store URL scheme 'ftp'; accepted: sqlite:///"),
        # one vocabulary of store URLs: what evaluate, alerts, import refuse, the demo refuses
        (["--store", "http://127.0.0.1:8086"], "--store http://127.0.0.1:8086: an HTTP address, not a store URL: "
                                               "for InfluxDB 1.x write influx1://127.0.0.1:8086/DATABASE"),
        (["--broker", "mqtt://127.0.0.1:1"], "cannot reach the MQTT broker at mqtt://127.0.0.1:1"),
    ],
)
def test_bad_input_is_refused_before_anything_starts(args: list[str], message: str) -> None:
    result = runner.invoke(app, ["demo", *args])
    assert result.exit_code in (1, 2), result.output
    assert message in result.output
    assert "Traceback" not in result.output


def test_an_unreachable_broker_is_one_line_before_the_banner() -> None:
    result = runner.invoke(app, ["demo", "--broker", "mqtt://127.0.0.1:1"])
    assert result.exit_code == 1
    assert result.output.splitlines() == [result.output.splitlines()[0]]
    assert result.output.startswith("error: cannot reach the MQTT broker at mqtt://127.0.0.1:1")


def test_a_site_file_given_as_the_scenario_is_told_in_plain_words() -> None:
    result = runner.invoke(app, ["demo", "--scenario", str(resources.example_site())])
    assert result.exit_code == 2, result.output
    assert "Input is not a valid path" not in result.output and "pydantic" not in result.output
    assert "is a site file, not a scenario" in result.output, result.output


def test_bad_tip_size_of_a_rain_file_names_the_file() -> None:
    path = data_file("tharandt_davis_tips_Sensor1.csv")
    result = runner.invoke(
        app, ["demo", "--rain-file", str(path), "--rain-delimiter", ";", "--rain-tip-mm", "abc"]
    )
    assert result.exit_code == 2
    assert "--tip-mm 'abc' is not a number" in result.output


def test_unknown_jurisdiction_is_refused(tmp_path) -> None:
    from tests.demo_support import example_doc, write_site

    doc = example_doc()
    doc["site"]["jurisdiction"] = "ch999"
    result = runner.invoke(app, ["demo", "--site", str(write_site(tmp_path, doc))])
    assert result.exit_code == 2
    assert "ch999" in result.output


def test_the_older_influx_option_keeps_its_http_address() -> None:
    assert influx_store_url("http://10.0.0.5:8086/", "stormwatch") == "influx1://10.0.0.5:8086/stormwatch"
    assert influx_store_url("https://db:8086", "site") == "influx1s://db:8086/site"
    assert influx_store_url("influx2://h:8086?org=o&bucket=b&token=t", "x") == "influx2://h:8086?org=o&bucket=b&token=t"
    assert influx_store_url("sqlite:///var/s.db") == "sqlite:///var/s.db"


def test_a_scenario_written_for_another_site_is_refused_in_one_line() -> None:
    from tests.conftest import REPO

    result = runner.invoke(app, ["demo", "--scenario", "two-outfalls", "--site", str(REPO / "examples" / "site.yaml")])
    assert result.exit_code == 2
    assert ("scenario two-outfalls: discharge_points outfall-1, outfall-2: site riverside-commons has no such "
            "discharge point (it has: turbidity_pair)") in result.output
    assert "Traceback" not in result.output
    result = runner.invoke(app, ["demo", "--scenario", "no-such-scenario"])
    assert result.exit_code == 2
    assert "bundled: default, concrete-washout, two-outfalls" in result.output
