"""Photos kept with a work order and the SMO's verification (stormwatch.alerts.workorders)."""

from __future__ import annotations

import hashlib
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from stormwatch.alerts.workorders import SCHEMA_VERSION, WorkOrderError, WorkOrders
from stormwatch.clock import ManualClock
from stormwatch.contract import Event

T0 = datetime(2026, 6, 2, 5, 0, tzinfo=UTC)


def _storm(book: WorkOrders) -> str:
    event = Event(kind="storm_inspection_due", site="a", event_time=T0, rule="R1", citation="Ch. 133 §133-7A(2)",
                  occurrence="storm:x", due_at=T0 + timedelta(hours=24), message="storm of 1.20 in")
    order, created = book.open_for(event, timezone="America/New_York")
    assert created
    return order.id


def test_photo_is_kept_with_its_bytes_and_recorded_in_the_history(tmp_path: Path) -> None:
    clock = ManualClock(T0 + timedelta(hours=2))
    book = WorkOrders(tmp_path / "alerts.db", clock)
    oid = _storm(book)
    data = b"\x89PNG\r\n\x1a\n" + bytes(range(256))
    photo = book.attach_photo(oid, "Ina", "silt-fence.png", "image/png", data)
    assert (photo.seq, photo.size, photo.sha256) == (1, 264, hashlib.sha256(data).hexdigest())
    assert [(p.filename, p.by, p.size) for p in book.photos(oid)] == [("silt-fence.png", "Ina", 264)]
    assert book.photo(oid, 1).data == data
    last = book.history(oid)[-1]
    assert (last.by, last.action, last.status, last.at) == ("Ina", "photo attached", "open", clock.now())
    assert last.notes.startswith("silt-fence.png (264 bytes, sha256 ")
    with pytest.raises(WorkOrderError, match="no photo 2"):
        book.photo(oid, 2)
    with pytest.raises(WorkOrderError, match="empty"):
        book.attach_photo(oid, "Ina", "x.png", "image/png", b"")
    with pytest.raises(WorkOrderError, match="must not be empty"):
        book.attach_photo(oid, " ", "x.png", "image/png", data)
    book.close()


def test_only_a_completed_order_is_verified(tmp_path: Path) -> None:
    book = WorkOrders(tmp_path / "alerts.db", ManualClock(T0 + timedelta(hours=3)))
    oid = _storm(book)
    with pytest.raises(WorkOrderError, match="only a completed order can be verified"):
        book.verify(oid, "Sam SMO")
    book.complete(oid, "Ina", "fence repaired")
    book.verify(oid, "Sam SMO", "log book checked")
    assert [(c.by, c.action, c.status, c.notes) for c in book.history(oid)][-1] == \
        ("Sam SMO", "verified", "completed", "log book checked")
    book.close()


def test_a_schema_2_state_file_gains_the_photo_table(tmp_path: Path) -> None:
    path = tmp_path / "alerts.db"
    book = WorkOrders(path, ManualClock(T0))
    oid = _storm(book)
    book.close()
    db = sqlite3.connect(path)
    db.execute("DROP TABLE work_order_photos")
    db.execute("PRAGMA user_version = 2")
    db.commit()
    db.close()
    book = WorkOrders(path, ManualClock(T0))
    assert book.photos(oid) == []
    assert book.history(oid)[0].action == "opened"
    book.attach_photo(oid, "Ina", "a.jpg", "image/jpeg", b"\xff\xd8\xff")
    book.close()
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 3
