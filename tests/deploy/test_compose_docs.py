"""The deployment documents agree with the code: the AsyncAPI contract with stormwatch/topics.py and
stormwatch/contract.py, the systemd unit with the gateway's command line."""

from __future__ import annotations

import json
import re

import yaml
from typer.testing import CliRunner

from stormwatch import storedack, topics
from stormwatch.app.cli import app
from stormwatch.contract import Event, Reading
from tests.conftest import REPO

ASYNCAPI = yaml.safe_load((REPO / "docs" / "asyncapi.yaml").read_text(encoding="utf-8"))


def test_asyncapi_is_version_3_with_the_topic_tree() -> None:
    assert ASYNCAPI["asyncapi"].startswith("3.")
    addresses = {name: ch["address"] for name, ch in ASYNCAPI["channels"].items()}
    assert addresses["readings"].format(site="s", gateway="g") == topics.readings("s", "g")
    assert addresses["status"].format(site="s", gateway="g") == topics.status("s", "g")
    assert addresses["events"].format(site="s") == topics.events("s")
    assert addresses["stored"].format(site="s", gateway="g") == topics.stored("s", "g")
    assert topics.stored_for(topics.readings("s", "g")) == topics.stored("s", "g")
    assert addresses["deadletter"] == topics.DEADLETTER
    for op in ASYNCAPI["operations"].values():
        ref = op["channel"]["$ref"].rsplit("/", 1)[1]
        assert ref in ASYNCAPI["channels"]


def test_asyncapi_payloads_match_the_models() -> None:
    schemas = ASYNCAPI["components"]["schemas"]
    assert set(schemas["Reading"]["properties"]) == set(Reading.model_fields)
    assert set(schemas["Reading"]["required"]) == {n for n, f in Reading.model_fields.items() if f.is_required()}
    # the stored-acknowledgement example is what ingest writes and the gateway reads
    example = ASYNCAPI["components"]["messages"]["storedAck"]["examples"][0]["payload"]
    assert storedack.decode(json.dumps(example).encode()) == [("9f1c2a", 0, 41), ("9f1c2a", 43, 43)]
    assert json.loads(storedack.encode("stormwatch-ingest", {"9f1c2a": [*range(42), 43]})) == example
    # the event schemas are generated from the rule registry (tests/alerts/test_rule_registry.py)
    assert set(schemas["EventCommon"]["required"]) == {n for n, f in Event.model_fields.items() if f.is_required()}


def test_systemd_unit_uses_real_gateway_options() -> None:
    unit = (REPO / "deploy" / "systemd" / "stormwatch-gateway.service").read_text(encoding="utf-8")
    exec_start = re.search(r"^ExecStart=(.*)$", unit, re.M)
    assert exec_start is not None
    options = set(re.findall(r"(--[a-z-]+)", exec_start.group(1)))
    assert options == {"--site", "--broker", "--state-dir"}
    help_text = CliRunner().invoke(app, ["gateway", "--help"], terminal_width=200).output
    for option in options | {"--check"}:
        assert option in help_text
    for key in ("Restart=always", "User=stormwatch", "EnvironmentFile=", "WantedBy=multi-user.target"):
        assert key in unit
