"""Work-order lifecycle (issue 12 item 3): status exactly open -> acknowledged -> completed, overdue a
separate flag, every change kept as history, --by/--notes/--status checked, the engine's clock
recorded in the state (a demo's state is read at simulated time), and a schema-1 state file still
opens (migrated). The service part runs on a real Mosquitto."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from typer.testing import CliRunner, Result

from stormwatch.alerts.service import AlertService
from stormwatch.alerts.workorders import ENGINE, SCHEMA_VERSION, EngineClock, WorkOrderError, WorkOrders
from stormwatch.app.cli import app
from stormwatch.clock import ManualClock, ScenarioClock, WallClock
from stormwatch.profiles import ProfileLibrary
from tests.alerts_support import T0, site, storm_due
from tests.names import run_unique

DUE = T0 + timedelta(hours=25)  # storm_due(): due 2026-06-02 13:00 UTC = 09:00 EDT


def cli(*args: str) -> Result:
    return CliRunner().invoke(app, ["workorders", *args])


def test_acknowledged_order_can_be_overdue_and_is_found_by_status(tmp_path: Path) -> None:
    clock = ManualClock(T0 + timedelta(hours=7))
    book = WorkOrders(tmp_path / "alerts.db", clock)
    order, _ = book.open_for(storm_due(), timezone="America/New_York")
    book.acknowledge(order.id, "ann")
    clock.set(DUE + timedelta(minutes=1))
    (flagged,) = book.mark_overdue()
    assert flagged.status == "acknowledged" and flagged.overdue_at == clock.now()
    assert [o.id for o in book.list(status="acknowledged")] == [order.id]
    assert [o.id for o in book.list(overdue_at=clock.now())] == [order.id]
    assert book.list(overdue_at=DUE) == []  # exactly at the deadline it is not yet late
    try:
        book.list(status="overdue")
    except WorkOrderError as exc:
        assert "unknown status 'overdue'" in str(exc)
    else:
        raise AssertionError("status 'overdue' accepted")


def test_every_change_is_kept_with_who_when_what_and_notes(tmp_path: Path) -> None:
    clock = ManualClock(T0 + timedelta(hours=7))
    book = WorkOrders(tmp_path / "alerts.db", clock)
    order, _ = book.open_for(storm_due(), timezone="America/New_York")
    clock.set(T0 + timedelta(hours=8))
    book.acknowledge(order.id, "ann", "on my way")
    clock.set(T0 + timedelta(hours=9))
    again = book.acknowledge(order.id, "bob")  # a second acknowledgement never replaces the first
    assert again.acknowledged_by == "ann" and again.acknowledged_at == T0 + timedelta(hours=8)
    clock.set(DUE + timedelta(hours=1))
    book.mark_overdue()
    clock.set(DUE + timedelta(hours=2))
    done = book.complete(order.id, "  cy ", " silt fence repaired at the outfall ")
    assert done.inspector == "cy" and done.notes == "silt fence repaired at the outfall"
    history = [(c.at, c.by, c.action, c.status, c.notes) for c in book.history(order.id)]
    assert history == [
        # the notes a person reads give site-local times with the year (the order's zone)
        (T0 + timedelta(hours=7), ENGINE, "opened", "open", "due Tue 02 Jun 2026 09:00 EDT"),
        (T0 + timedelta(hours=8), "ann", "acknowledged", "acknowledged", "on my way"),
        (T0 + timedelta(hours=9), "bob", "acknowledged", "acknowledged", ""),
        (DUE + timedelta(hours=1), ENGINE, "overdue", "acknowledged", "due Tue 02 Jun 2026 09:00 EDT passed"),
        (DUE + timedelta(hours=2), "cy", "completed", "completed", "silt fence repaired at the outfall"),
    ]


def test_names_notes_and_transitions_are_checked(tmp_path: Path) -> None:
    book = WorkOrders(tmp_path / "alerts.db", ManualClock(T0))
    order, _ = book.open_for(storm_due())
    for call in (lambda: book.acknowledge(order.id, "  "), lambda: book.complete(order.id, "", "done"),
                 lambda: book.complete(order.id, "ann", " \n")):
        try:
            call()
        except WorkOrderError as exc:
            assert "must not be empty" in str(exc)
        else:
            raise AssertionError("empty name or note accepted")
    book.complete(order.id, "ann", "done")  # open -> completed directly: the inspector did the work
    for call in (lambda: book.acknowledge(order.id, "bob"), lambda: book.complete(order.id, "bob", "again")):
        try:
            call()
        except WorkOrderError as exc:
            assert "completed at Mon 01 Jun 2026 12:00 UTC by ann" in str(exc)  # an order opened in UTC
        else:
            raise AssertionError("a completed order changed")
    assert [c.action for c in book.history(order.id)] == ["opened", "completed"]


def test_cli_checks_by_status_and_notes_with_one_line(tmp_path: Path) -> None:
    book = WorkOrders(tmp_path / "alerts.db", ManualClock(T0))
    order, _ = book.open_for(storm_due())
    book.close()
    d = str(tmp_path)
    for args, expected in (
        (["ack", order.id, "--by", " ", "--state-dir", d], "the name of who acknowledges (--by) must not be empty"),
        (["complete", order.id, "--by", "ann", "--notes", "", "--state-dir", d], "a completion note (--notes"),
        (["list", "--status", "overdue", "--state-dir", d], "overdue is not a status: use --overdue"),
        (["list", "--status", "done", "--state-dir", d], "expected one of open, acknowledged, completed"),
        (["show", "WO-nope", "--state-dir", d], "no work order 'WO-nope'"),
        (["list", "--state-dir", str(tmp_path / "elsewhere")], "no work-order state file"),
    ):
        result = cli(*args)
        assert result.exit_code == 2, (args, result.output)
        assert result.output.count("\n") == 1 and expected in result.output, (args, result.output)
        assert "Traceback" not in result.output


def test_cli_show_prints_history_in_site_local_time(tmp_path: Path) -> None:
    clock = ManualClock(T0 + timedelta(hours=7))
    book = WorkOrders(tmp_path / "alerts.db", clock)
    order, _ = book.open_for(storm_due(), timezone="America/New_York")
    book.record_clock(clock, stopped=True)  # an engine on a simulated clock stopped at 15:00 EDT
    book.close()
    d = str(tmp_path)
    assert cli("ack", order.id, "--by", "ann", "--state-dir", d).exit_code == 0
    second = cli("ack", order.id, "--by", "bob", "--notes", "covering for ann", "--state-dir", d)
    assert second.exit_code == 0 and "already acknowledged by ann at Mon 01 Jun 2026 15:00 EDT" in second.output
    shown = cli("show", order.id, "--state-dir", d)
    assert shown.exit_code == 0, shown.output
    text = shown.output
    assert "status: acknowledged" in text and "due: Tue 02 Jun 2026 09:00 EDT" in text
    assert "Mon 01 Jun 2026 15:00 EDT  opened       by alert engine" in text
    assert "Mon 01 Jun 2026 15:00 EDT  acknowledged by bob  covering for ann" in text
    assert "None" not in text and "{" not in text
    as_json = json.loads(cli("show", order.id, "--state-dir", d, "--json").output)
    assert [c["by"] for c in as_json["history"]] == [ENGINE, "ann", "bob"]
    utc = cli("show", order.id, "--state-dir", d, "--tz", "UTC")
    assert "due: Tue 02 Jun 2026 13:00 UTC" in utc.output


def test_engine_clock_decides_what_a_reader_sees() -> None:
    wall = EngineClock(kind="wall", last_now=T0, stopped=False)
    assert isinstance(wall.reader_clock()[0], WallClock)
    stopped = EngineClock(kind="simulated", last_now=T0, stopped=True,
                          scenario=ScenarioClock(sim_start=T0, speed=1000.0, wall_start=time.time() - 60))
    assert stopped.reader_clock()[0].now() == T0
    assert isinstance(stopped.reader_clock(wall_time=True)[0], WallClock)
    running = ScenarioClock(sim_start=T0, speed=1000.0, wall_start=time.time())
    live = EngineClock(kind="simulated", last_now=running.now(), stopped=False, scenario=running)
    assert live.reader_clock()[0] is running
    # a simulation that died without recording its stop: its formula ran on, its last record did not
    dead = EngineClock(kind="simulated", last_now=T0, stopped=False,
                       scenario=ScenarioClock(sim_start=T0, speed=1000.0, wall_start=time.time() - 3600))
    assert dead.reader_clock()[0].now() == T0


def test_a_demo_state_is_read_at_simulated_time_on_mosquitto(mosquitto_server, tmp_path: Path) -> None:
    """The alert service on a simulated clock records it; after it stops, `workorders list` judges
    due dates at the simulated time it reached (not overdue), `--wall-time` at today's (overdue)."""
    state = tmp_path / "alerts.db"
    book = WorkOrders(state, ManualClock(T0 + timedelta(hours=7)))
    order, _ = book.open_for(storm_due(), timezone="America/New_York")
    book.close()
    clock = ScenarioClock(sim_start=T0 + timedelta(hours=8), speed=600.0, wall_start=time.time())
    svc = AlertService([site("ch133")], ProfileLibrary(), mosquitto_server.url, None, state, clock,
                       client_id=run_unique("wo-lifecycle-clock"), overdue_check_s=60)
    runner = threading.Thread(target=svc.run, daemon=True)
    runner.start()
    try:
        assert svc.connected.wait(10)
        time.sleep(1.5)
        live = cli("list", "--state-dir", str(tmp_path))
        assert live.exit_code == 0 and "simulated time of the running alert engine" in live.output, live.output
    finally:
        svc.stop()
        runner.join(10)
    recorded = WorkOrders(state, ManualClock(T0)).engine_clock()
    assert recorded is not None and recorded.stopped and recorded.kind == "simulated"
    assert T0 + timedelta(hours=8) < recorded.last_now < DUE  # about 8 h + a few simulated minutes
    listed = cli("list", "--state-dir", str(tmp_path))
    assert listed.exit_code == 0, listed.output
    first, row = listed.output.splitlines()
    assert first.startswith("as of Mon 01 Jun 2026 ") and "simulated time the alert engine reached" in first
    assert row.split()[:3] == [order.id, "open", "s1"]
    assert "due Tue 02 Jun 2026 09:00 EDT" in row
    assert json.loads(cli("list", "--state-dir", str(tmp_path), "--json").output)[0]["overdue"] is False
    assert cli("list", "--overdue", "--state-dir", str(tmp_path)).output.splitlines()[1:] == []
    walled = cli("list", "--wall-time", "--state-dir", str(tmp_path))
    assert "wall-clock time" in walled.output and f"{order.id}  open         overdue" in walled.output


SCHEMA_1 = """
CREATE TABLE work_orders (
    id TEXT PRIMARY KEY, site TEXT NOT NULL, kind TEXT NOT NULL, rule TEXT NOT NULL, citation TEXT NOT NULL,
    occurrence TEXT NOT NULL, event_time TEXT NOT NULL, opened_at TEXT NOT NULL, due_at TEXT, status TEXT NOT NULL,
    message TEXT NOT NULL DEFAULT '', evidence TEXT NOT NULL DEFAULT '[]', inspector TEXT, notes TEXT,
    acknowledged_at TEXT, acknowledged_by TEXT, completed_at TEXT, report_json TEXT, parent TEXT,
    UNIQUE (site, rule, occurrence)
);
CREATE INDEX work_orders_site ON work_orders (site, rule, completed_at);
"""


def _ts(t: datetime) -> str:
    return t.astimezone(UTC).isoformat(timespec="microseconds")


def test_a_schema_1_state_file_opens_migrated(tmp_path: Path) -> None:
    """A state file of the previous release (status 'overdue', no history) opens: statuses become
    open/acknowledged, the overdue flag is kept, and the history is rebuilt from its times."""
    path = tmp_path / "alerts.db"
    db = sqlite3.connect(path)
    db.executescript(SCHEMA_1)
    rows = [  # id, status, acknowledged (at, by), completed (at, by, notes)
        ("WO-a", "overdue", None, None),
        ("WO-b", "overdue", (T0 + timedelta(hours=30), "ann"), None),  # acked after it went overdue
        ("WO-c", "completed", (T0 + timedelta(hours=2), "bob"), (T0 + timedelta(hours=3), "bob", "fence fixed")),
        ("WO-d", "open", None, None),
    ]
    for oid, status, ack, done in rows:
        db.execute("INSERT INTO work_orders (id, site, kind, rule, citation, occurrence, event_time, opened_at, due_at,"
                   " status, message, acknowledged_at, acknowledged_by, completed_at, inspector, notes)"
                   " VALUES (?, 's1', 'storm_inspection', 'R1', 'Ch. 133 §133-7A(2)', ?, ?, ?, ?, ?, 'storm', ?, ?, ?,"
                   " ?, ?)",
                   (oid, oid, _ts(T0), _ts(T0), _ts(DUE), status, ack and _ts(ack[0]), ack and ack[1],
                    done and _ts(done[0]), (done and done[1]) or (ack and ack[1]), done and done[2]))
    db.commit()
    db.close()

    listed = CliRunner().invoke(app, ["workorders", "list", "--state", str(path), "--json", "--wall-time"])
    assert listed.exit_code == 0, listed.output
    got = {o["id"]: (o["status"], o["overdue_at"], o["overdue"]) for o in json.loads(listed.output)}
    assert got == {"WO-a": ("open", "2026-06-02T13:00:00Z", True),
                   "WO-b": ("acknowledged", "2026-06-02T13:00:00Z", True),
                   "WO-c": ("completed", None, False),
                   "WO-d": ("open", None, True)}
    book = WorkOrders(path, ManualClock(DUE + timedelta(hours=1)))
    assert [(c.by, c.action, c.status) for c in book.history("WO-b")] == [
        (ENGINE, "opened", "open"), (ENGINE, "overdue", "open"), ("ann", "acknowledged", "acknowledged")]
    assert [(c.by, c.action, c.notes) for c in book.history("WO-c")][1:] == [
        ("bob", "acknowledged", "reconstructed: only the last acknowledgement was kept"),
        ("bob", "completed", "fence fixed")]
    assert [o.id for o in book.mark_overdue()] == ["WO-d"]  # WO-a/b were announced by the old release
    book.close()
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
