"""How the consumer fills a batch from what has arrived: at most ``batch_size`` messages, and no more
once the batch holds ``BATCH_BYTES`` of payload (docs/ingest.md, "1. Acknowledge after the durable
write")."""

from __future__ import annotations

from pathlib import Path

from stormwatch.clock import ManualClock
from stormwatch.config import load_site
from stormwatch.ingest.consumer import BATCH_BYTES, Ingest, _Message
from stormwatch.ingest.validate import Validator
from stormwatch.profiles import ProfileLibrary
from stormwatch.stores.sqlite import SqliteStore
from tests.ingest.test_fastwire import NOW, REPO, TOPIC


def _ingest(tmp_path: Path, batch_size: int) -> Ingest:
    profiles = ProfileLibrary()
    clock = ManualClock(NOW)
    validator = Validator.for_sites([load_site(REPO / "examples" / "site.yaml", profiles)], profiles, clock)
    return Ingest(validator, SqliteStore(tmp_path / "s.db"), "mqtt://127.0.0.1:1", clock=clock,
                  batch_size=batch_size, batch_ms=0)


def _arrive(ingest: Ingest, sizes: list[int]) -> None:
    for k, size in enumerate(sizes):
        ingest._inbox.append(_Message(TOPIC, b"x" * size, k + 1, 1, False, 0))
        ingest.received += 1


def test_a_batch_ends_at_its_message_count(tmp_path: Path) -> None:
    ingest = _ingest(tmp_path, batch_size=3)
    _arrive(ingest, [100] * 7)
    assert [m.mid for m in ingest._collect()] == [1, 2, 3]
    assert [m.mid for m in ingest._collect()] == [4, 5, 6]


def test_a_batch_ends_once_it_holds_its_bytes(tmp_path: Path) -> None:
    ingest = _ingest(tmp_path, batch_size=1000)
    third = BATCH_BYTES // 3 + 1
    _arrive(ingest, [third, third, third, third, 10])
    assert [m.mid for m in ingest._collect()] == [1, 2, 3]  # the third brings it past BATCH_BYTES
    assert [m.mid for m in ingest._collect()] == [4, 5]
