"""The rule registry (issue 13 item 1): a rule kind is one module; the engine, the contract's event
kinds, work orders, the InfluxDB event fields and docs/asyncapi.yaml come from the registry.

Acceptance: a pH rule written here as a new module (a threshold on a ``ph`` quantity), a pack that
uses it, a probe profile and a site -- all in the test's own directories, named by the same
environment variables a user would set -- loads from the pack and emits its events end to end
(readings over Mosquitto → the alert service → events published, stored, a work order opened), with
no file of the repository changed.
"""

from __future__ import annotations

import json
import subprocess
import textwrap
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import paho.mqtt.client as mqtt
import pytest
import yaml
from paho.mqtt.enums import CallbackAPIVersion

from stormwatch import topics
from stormwatch.alerts import asyncapi
from stormwatch.alerts.packs import PackError, load_pack
from stormwatch.alerts.rules.registry import RULES_ENV, rule_kinds
from stormwatch.alerts.service import AlertService
from stormwatch.alerts.workorders import WorkOrders, opening_kinds
from stormwatch.app import servers
from stormwatch.clock import ManualClock
from stormwatch.config import parse_site
from stormwatch.contract import Event, Reading, dump_readings
from stormwatch.profiles import ProfileLibrary
from stormwatch.stores.lineprotocol import event_point
from stormwatch.stores.sqlite import SqliteStore
from tests.conftest import REPO
from tests.names import run_unique
from tests.waits import wait_until

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)

PH_RULE = '''
"""pH of the discharge outside the permit's range: one rule module (a test of the registry)."""

from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo
from typing import Literal

from pydantic import Field

from stormwatch.alerts.packs import RuleParams
from stormwatch.alerts.rules.registry import EventKindSpec, Role, RuleContext, RuleKind
from stormwatch.contract import Event, EventDetails, Reading
from stormwatch.wire import format_time


class PhRule(RuleParams):
    kind: Literal["ph"]
    low: float = Field(default=6.5, gt=0, lt=14)
    high: float = Field(default=8.5, gt=0, lt=14)
    respond_within_hours: float = Field(default=24.0, gt=0)


class PhDetails(EventDetails):
    """The pH reading that left (or came back into) the range, and the range."""

    ph: float
    low: float
    high: float

    def summary(self, tz: ZoneInfo) -> str:
        return f"pH {self.ph:.2f} (range {self.low:g}-{self.high:g})"


class PhState:
    def __init__(self, site: str, rule_id: str, params: PhRule, probe: str) -> None:
        self.site, self.rule_id, self.params, self.probe = site, rule_id, params, probe
        self.next_due: datetime | None = None
        self.since: datetime | None = None  # start of the excursion in progress

    def wants(self, reading: Reading) -> bool:
        return reading.device == self.probe and reading.quantity == "ph"

    def _event(self, kind: str, reading: Reading, message: str, **extra: object) -> Event:
        assert self.since is not None
        p = self.params
        return Event(kind=kind, site=self.site, event_time=reading.time, rule=self.rule_id, citation=p.citation,
                     occurrence=f"ph:{format_time(self.since)}", message=message,
                     details=PhDetails(ph=float(reading.value), low=p.low, high=p.high), **extra)

    def feed(self, reading: Reading) -> list[Event]:
        if reading.flags:
            return []
        p, ph = self.params, float(reading.value)
        outside = not p.low <= ph <= p.high
        if outside and self.since is None:
            self.since = reading.time
            due = reading.time + timedelta(hours=p.respond_within_hours)
            return [self._event("ph_excursion", reading, f"pH {ph:g} outside {p.low:g}-{p.high:g}", due_at=due)]
        if not outside and self.since is not None:
            event = self._event("ph_restored", reading, f"pH {ph:g} back inside {p.low:g}-{p.high:g}")
            self.since = None
            return [event]
        return []

    def advance_to(self, t: datetime) -> list[Event]:
        return []


def build(ctx: RuleContext) -> PhState | None:
    probe = ctx.device("ph_probe")
    if probe is None:
        return None
    assert isinstance(ctx.params, PhRule)
    return PhState(ctx.site, ctx.rule_id, ctx.params, probe)


KIND = RuleKind(
    kind="ph", params=PhRule, build=build, summary="discharge pH inside the permit's range",
    roles=(Role("ph_probe", "ph", "the discharge pH probe"),),
    events=(EventKindSpec("ph_excursion", PhDetails, "pH left the range", opens="ph_review"),
            EventKindSpec("ph_restored", PhDetails, "pH back inside the range")),
)
'''

PH_PROFILE = {
    "model": "acme_ph_probe", "manufacturer": "Acme", "description": "A Modbus pH probe (test).",
    "source": "tests/alerts/test_rule_registry.py", "protocol": "modbus",
    "modbus": {"points": [{"quantity": "ph", "unit": "[pH]", "table": "holding", "address": 0, "type": "float32",
                           "order": "ABCD", "valid_range": [0.0, 14.0]}]},
}
PH_PACK = {"name": "phtest", "title": "a permit with a pH range (test)", "source": "tests/alerts/test_rule_registry.py",
           "rules": {"RpH": {"kind": "ph", "citation": "test permit §pH (6.5-8.5)", "low": 6.5, "high": 8.5}}}
PH_SITE = {"site": {"id": "ph-site", "jurisdiction": "phtest", "timezone": "UTC"}, "gateway_id": "gw-ph",
           "devices": [{"id": "ph-1", "profile": "acme_ph_probe", "transport": {"kind": "modbus-tcp", "host": "h"}}],
           "roles": {"ph_probe": "ph-1"}}


@pytest.fixture()
def ph_world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The rule module, pack and profile in the test's own directories, named by the environment."""
    for name in ("rules", "packs", "profiles"):
        (tmp_path / name).mkdir()
    (tmp_path / "rules" / "ph.py").write_text(PH_RULE, encoding="utf-8")
    (tmp_path / "packs" / "phtest.yaml").write_text(yaml.safe_dump(PH_PACK), encoding="utf-8")
    (tmp_path / "profiles" / "acme_ph_probe.yaml").write_text(yaml.safe_dump(PH_PROFILE), encoding="utf-8")
    monkeypatch.setenv(RULES_ENV, str(tmp_path / "rules"))
    monkeypatch.setenv("STORMWATCH_PACKS", str(tmp_path / "packs"))
    monkeypatch.setenv("STORMWATCH_PROFILES", str(tmp_path / "profiles"))
    return tmp_path


def test_a_ph_rule_module_emits_its_events_end_to_end(ph_world: Path, mosquitto_server: servers.Mosquitto) -> None:
    before = subprocess.run(["git", "status", "--porcelain"], cwd=REPO, capture_output=True, text=True).stdout
    profiles = ProfileLibrary()
    cfg = parse_site(PH_SITE, "ph-site.yaml", profiles)
    pack = load_pack("phtest")
    assert pack.rules["RpH"].kind == "ph" and type(pack.rules["RpH"]).__name__ == "PhRule"
    assert opening_kinds()["ph_excursion"] == "ph_review"

    store = SqliteStore(ph_world / "store.db")
    seen: list[Event] = []
    clock = ManualClock(T0)
    service = AlertService([cfg], profiles, mosquitto_server.url, store, ph_world / "state.db", clock,
                           client_id=run_unique("ph-alerts"), lateness_s=120, on_event=seen.append, overdue_check_s=0.1)
    runner = threading.Thread(target=service.run, daemon=True)
    runner.start()
    published: list[dict[str, object]] = []
    listener = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=run_unique("ph-listener"))
    listener.on_message = lambda _c, _u, msg: published.append(json.loads(msg.payload))
    listener.connect("127.0.0.1", mosquitto_server.port)
    listener.subscribe(topics.events("ph-site"), qos=1)
    listener.loop_start()
    gw = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=run_unique("ph-gw"))
    gw.connect("127.0.0.1", mosquitto_server.port)
    gw.loop_start()
    values = [7.2, 7.1, 9.1, 9.0, 7.4] + [7.3] * 5  # leaves the range at minute 2, back at minute 4
    try:
        assert service.connected.wait(10)
        for seq, ph in enumerate(values):
            r = Reading(site="ph-site", device="ph-1", quantity="ph", value=ph, unit="[pH]",
                        time=T0 + timedelta(minutes=seq), gateway="gw-ph", boot="b", seq=seq)
            clock.set(r.time)  # measured now: the engine ignores readings from its future
            gw.publish(topics.readings("ph-site", "gw-ph"), dump_readings([r]), qos=1).wait_for_publish(5)
        wait_until(lambda: len(published) >= 2, 15, "the pH events on the events topic")
    finally:
        gw.loop_stop()
        listener.loop_stop()
        service.stop()
        runner.join(10)

    assert [(e.kind, e.event_time, e.details.ph) for e in seen] == [  # type: ignore[attr-defined]
        ("ph_excursion", T0 + timedelta(minutes=2), 9.1), ("ph_restored", T0 + timedelta(minutes=4), 7.4)]
    excursion = seen[0]
    assert type(excursion.details).__name__ == "PhDetails"
    assert excursion.due_at == T0 + timedelta(minutes=2, hours=24)
    assert excursion.citation == "test permit §pH (6.5-8.5)" and excursion.work_order is not None
    # on the wire: flat details beside the common fields
    assert published[0]["kind"] == "ph_excursion" and published[0]["ph"] == 9.1 and published[0]["high"] == 8.5
    # stored, read back typed; the work order opened with the kind the module declared
    stored = store.query_events("ph-site")
    assert [(e.kind, type(e.details).__name__, e.details.ph) for e in stored] == [  # type: ignore[attr-defined]
        ("ph_excursion", "PhDetails", 9.1), ("ph_restored", "PhDetails", 7.4)]
    store.close()
    book = WorkOrders(ph_world / "state.db", clock)
    order = book.get(excursion.work_order)
    assert (order.kind, order.rule, order.citation) == ("ph_review", "RpH", "test permit §pH (6.5-8.5)")
    # InfluxDB fields and the AsyncAPI schema come from the module's details model
    fields = event_point(excursion).fields
    assert (fields["ph"], fields["low"], fields["high"]) == (9.1, 6.5, 8.5)
    schemas = asyncapi.event_schemas(rule_kinds())
    assert schemas["PhDetailsEvent"]["allOf"][1]["properties"]["kind"]["enum"] == ["ph_excursion", "ph_restored"]
    assert subprocess.run(["git", "status", "--porcelain"], cwd=REPO, capture_output=True,
                          text=True).stdout == before  # no file of the repository changed


def test_a_site_role_on_a_device_without_the_quantity_is_refused(ph_world: Path) -> None:
    from stormwatch.alerts.engine import Engine, EngineError

    doc = {**PH_SITE, "devices": [*PH_SITE["devices"],  # type: ignore[list-item]
                                  {"id": "turb", "profile": "yosemitech_y511",
                                   "transport": {"kind": "modbus-tcp", "host": "h"}}],
           "roles": {"ph_probe": "turb"}}
    cfg = parse_site(doc, "ph-site.yaml", ProfileLibrary())
    with pytest.raises(EngineError, match=r"RpH \(ph\): roles.ph_probe: device 'turb' .* does not report 'ph'"):
        Engine.for_site(cfg, ProfileLibrary())


@pytest.mark.parametrize(("code", "line", "why"), [
    ("def x(:\n    pass\n", 1, "invalid syntax"),
    ("import math\n\nLIMIT = math.sqrt(4)\nraise RuntimeError('no probe table')\n", 4,
     "RuntimeError: no probe table"),
], ids=["syntax", "raises"])
def test_a_rule_module_that_does_not_load_is_named_by_its_file_and_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: str, line: int, why: str) -> None:
    """Not "<pack>.yaml: rules./tmp/.../bad.py: ..." -- the pack is fine; the module is not."""
    from typer.testing import CliRunner

    from stormwatch.app.cli import app
    from stormwatch.resources import example_site

    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "bad.py").write_text(code, encoding="utf-8")
    monkeypatch.setenv(RULES_ENV, str(rules))
    result = CliRunner().invoke(app, ["gateway", "--check", "--site", str(example_site())], catch_exceptions=False)
    assert result.exit_code == 2
    assert result.output == f"error: {rules / 'bad.py'}:{line}: cannot load rule module: {why}\n"


def test_two_modules_declaring_one_kind_name_both_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from stormwatch.app.cli import app
    from stormwatch.resources import example_site

    rules = tmp_path / "rules"
    rules.mkdir()
    for name in ("ph.py", "ph_copy.py"):
        (rules / name).write_text(PH_RULE, encoding="utf-8")
    monkeypatch.setenv(RULES_ENV, str(rules))
    result = CliRunner().invoke(app, ["gateway", "--check", "--site", str(example_site())], catch_exceptions=False)
    assert result.exit_code == 2
    assert result.output == (f"error: rule kind 'ph' declared twice: by {rules / 'ph.py'} and by "
                             f"{rules / 'ph_copy.py'} (rename one module's kind)\n")


def test_an_unknown_rule_kind_in_a_pack_names_the_known_ones(tmp_path: Path) -> None:
    (tmp_path / "odd.yaml").write_text("name: odd\nrules:\n  R7: {kind: hail, citation: x}\n", encoding="utf-8")
    with pytest.raises(PackError, match=r"odd\.yaml: rules\.R7\.kind: 'hail' is not a rule kind \(known: basin, "
                                        r"benchmark, daily_average, report, routine, sampling, storm, turbidity\)"):
        load_pack("odd", directory=tmp_path)


def test_the_builtin_registry() -> None:
    """The built-in modules declare the kinds and orders the codes need (workorders.py's table)."""
    registry = rule_kinds([])
    assert set(registry.kinds) == {"storm", "routine", "report", "turbidity", "basin", "daily_average", "benchmark",
                                   "sampling"}
    assert registry.opening_kinds() == {
        "storm_inspection_due": "storm_inspection", "routine_inspection_due": "routine_inspection",
        "turbidity_contrast": "turbidity_review", "basin_cleanout_due": "basin_cleanout",
        "nal_exceedance": "nal_report", "benchmark_action_due": "benchmark_response", "sampling_due": "sampling"}
    assert registry.closing_kinds() == {"sampling_done": "sampling"}  # a recorded sample completes its reminder
    assert registry.inspection_orders() == ("routine_inspection", "storm_inspection")
    assert {"data_gap", "inspection_overdue", "report_due", "storm_started"} <= set(registry.events)


def test_stored_events_of_an_unloaded_kind_are_kept_as_they_came() -> None:
    wire = {"kind": "hail_reported", "site": "s", "event_time": "2026-06-01T12:00:00Z", "rule": "RH",
            "citation": "x", "occurrence": "hail:1", "message": "", "hail_mm": 12.5, "note": "golf ball"}
    event = Event.model_validate(wire)
    assert type(event.details).__name__ == "OtherDetails" and event.to_wire() == wire


def test_the_committed_asyncapi_document_is_generated_from_the_registry() -> None:
    """docs/asyncapi.yaml's event schemas are the registry's (python -m stormwatch.alerts.asyncapi --write)."""
    path = REPO / "docs" / "asyncapi.yaml"
    text = path.read_text(encoding="utf-8")
    assert asyncapi.updated(text, rule_kinds([])) == text, "docs/asyncapi.yaml is stale: run " \
        "python -m stormwatch.alerts.asyncapi --write"
    doc = yaml.safe_load(text)
    kinds = {k for name, s in doc["components"]["schemas"].items() if name.endswith("DetailsEvent")
             for k in s["allOf"][1]["properties"]["kind"]["enum"]}
    assert kinds == set(rule_kinds([]).events)
    common = doc["components"]["schemas"]["EventCommon"]
    assert set(common["properties"]) == set(Event.model_fields) - {"details"}
    assert textwrap.dedent(asyncapi.BEGIN).strip() in text
