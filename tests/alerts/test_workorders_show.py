"""``workorders show`` of a storm order fits one screen: its tip readings (one evidence item each,
a hundred or more in a real storm) are counted in one line that says where every item is
(``--evidence full``, ``--evidence csv``)."""

from __future__ import annotations

import csv
import io
from datetime import timedelta
from pathlib import Path

from typer.testing import CliRunner

from stormwatch.alerts.workorders import WorkOrders
from stormwatch.app.cli import app
from stormwatch.clock import ManualClock
from stormwatch.contract import Event
from tests.alerts_support import T0

TIPS = 106  # the storm order of the demo run: a 106-row tip table


def _storm_book(path: Path) -> str:
    evidence = [{"time": (T0 + timedelta(minutes=5 * i)).strftime("%Y-%m-%dT%H:%M:%SZ"), "tips": 1 + i % 2,
                 "gateway": "gw-1", "boot": "b0", "seq": i, "flags": ["counter_catch_up"] if i < 3 else []}
                for i in range(TIPS)]
    last = T0 + timedelta(minutes=5 * (TIPS - 1))
    event = Event(kind="storm_inspection_due", site="s1", event_time=last + timedelta(hours=6), rule="R1",
                  citation="Ch. 133 §133-7A(2)", occurrence="storm:2026-06-01T12:00:00Z",
                  due_at=last + timedelta(hours=24), tips=159, depth_in=1.59, evidence=evidence)
    book = WorkOrders(path, ManualClock(last + timedelta(hours=7)))
    order, _ = book.open_for(event)
    book.close()
    return order.id


def _show(path: Path, oid: str, *more: str) -> str:
    result = CliRunner().invoke(app, ["workorders", "show", oid, "--state", str(path), "--tz", "UTC", *more])
    assert result.exit_code == 0, result.output
    return result.output


def test_storm_order_fits_one_screen_and_says_where_the_rest_is(tmp_path: Path) -> None:
    oid = _storm_book(tmp_path / "alerts.db")
    out = _show(tmp_path / "alerts.db", oid)
    assert len(out.splitlines()) <= 40, out
    assert "gw-1" not in out and "seq" not in out  # no single tips
    tips = sum(1 + i % 2 for i in range(TIPS))
    assert f"{TIPS} tip readings ({tips} tips, 3 flagged) from Mon 01 Jun 2026 12:00 UTC to " \
           f"Mon 01 Jun 2026 {(T0 + timedelta(minutes=5 * (TIPS - 1))):%H:%M} UTC" in out
    assert "--evidence full" in out and "--evidence csv" in out
    assert "why:" in out and "due:" in out and "history:" in out


def test_full_and_csv_evidence_list_every_item(tmp_path: Path) -> None:
    oid = _storm_book(tmp_path / "alerts.db")
    full = _show(tmp_path / "alerts.db", oid, "--evidence", "full")
    assert sum(1 for line in full.splitlines() if "gateway gw-1" in line) == TIPS
    rows = list(csv.DictReader(io.StringIO(_show(tmp_path / "alerts.db", oid, "--evidence", "csv"))))
    assert len(rows) == TIPS and [int(r["seq"]) for r in rows] == list(range(TIPS))
    assert rows[0]["flags"] == '["counter_catch_up"]' and rows[0]["time"] == "2026-06-01T12:00:00Z"
    bad = CliRunner().invoke(app, ["workorders", "show", oid, "--state", str(tmp_path / "alerts.db"),
                                   "--evidence", "all"])
    assert bad.exit_code == 2 and bad.output == "error: --evidence 'all': summary, full or csv\n"
