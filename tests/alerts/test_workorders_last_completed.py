"""The work-order book's last completed inspection, as the routine rule asks it at every watermark
move: kept between asks, and new as soon as any writer of the state file completes an order."""

from __future__ import annotations

import sqlite3
from datetime import datetime, timedelta
from pathlib import Path

from typer.testing import CliRunner

from stormwatch.alerts.workorders import WorkOrders
from stormwatch.app.cli import app
from stormwatch.clock import ManualClock
from tests.alerts_support import T0, storm_due

STORM = ("storm_inspection",)


def test_an_order_completed_by_this_book_is_seen_at_the_next_ask(tmp_path: Path) -> None:
    book = WorkOrders(tmp_path / "alerts.db", ManualClock(T0 + timedelta(hours=8)))
    assert book.last_completed("s1", STORM) is None
    first, _ = book.open_for(storm_due("storm:2026-06-01T12:00:00Z"))
    second, _ = book.open_for(storm_due("storm:2026-06-02T12:00:00Z"))
    assert book.last_completed("s1", STORM) is None  # open orders are not inspections done
    book.complete(first.id, "ann", "all BMPs in place", at=T0 + timedelta(hours=9))
    assert book.last_completed("s1", STORM) == T0 + timedelta(hours=9)
    assert book.last_completed("s2", STORM) is None
    assert book.last_completed("s1", ("routine_inspection",)) is None
    book.complete(second.id, "ann", "silt fence mended", at=T0 + timedelta(hours=11))
    assert book.last_completed("s1", STORM) == T0 + timedelta(hours=11)
    assert book.last_completed("s1", ("routine_inspection", *STORM)) == T0 + timedelta(hours=11)


def test_an_order_completed_on_another_connection_is_seen_at_the_next_ask(tmp_path: Path) -> None:
    state = tmp_path / "alerts.db"
    service = WorkOrders(state, ManualClock(T0 + timedelta(hours=8)))
    order, _ = service.open_for(storm_due())
    assert service.last_completed("s1", STORM) is None
    assert service.last_completed("s1", STORM) is None  # asked again with nothing changed
    # the inspector completes it from another process's book (the web desk's, the CLI's)
    result = CliRunner().invoke(app, ["workorders", "complete", order.id, "--by", "ann", "--notes", "inlet clear",
                                      "--state-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    other = sqlite3.connect(state, isolation_level=None)
    done = other.execute("SELECT completed_at FROM work_orders WHERE id = ?", (order.id,)).fetchone()[0]
    assert done is not None
    assert service.last_completed("s1", STORM) == datetime.fromisoformat(done.replace("Z", "+00:00"))
    # and a change made to the file by plain SQL (no WorkOrders at all) as well
    other.execute("UPDATE work_orders SET completed_at = ? WHERE id = ?", ("2026-06-01T23:00:00Z", order.id))
    other.close()
    assert service.last_completed("s1", STORM) == T0 + timedelta(hours=11)
    service.close()
