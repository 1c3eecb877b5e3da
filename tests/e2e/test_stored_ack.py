"""End-to-end stored-acknowledgement (issue 18): a gateway forgets a reading only when ingest says the
store holds it, so a broker that crashes and forgets what it held loses nothing.

Real Mosquitto -- with ``autosave_interval 3600``, so a SIGKILL loses every session and queued message
since it started, as Mosquitto's default (1800 s) does in the field -- a real gateway publisher and
outbox, real ingest (in this process, or ``stormwatch ingest`` processes SIGKILLed) writing to SQLite.
What is stored is read back with SQL, independently of the store's code.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import uuid
from datetime import timedelta
from pathlib import Path

import pytest

from stormwatch import storedack
from stormwatch.app import servers
from stormwatch.clock import ManualClock
from stormwatch.gateway.outbox import Outbox
from stormwatch.gateway.publisher import MqttPublisher
from stormwatch.runtime.mqtt import parse_broker_url
from stormwatch.stores.sqlite import SqliteStore
from stormwatch.wire import WireReading
from tests.ingest_support import GW, INGEST_NOW, REPO, SITE, T0, Running, ids
from tests.waits import wait_until

pytestmark = pytest.mark.mosquitto

#: Mosquitto saves its state this rarely in these tests: a SIGKILL loses everything since its start.
FORGETFUL = "autosave_interval 3600\n"


def _readings(boot: str, seqs: range, device: str = "turb-down") -> list[WireReading]:
    """Turbidity readings of the example site's gateway, one a second from T0 (all before INGEST_NOW)."""
    return [WireReading(site=SITE, device=device, quantity="turbidity", value=1.0 + s / 10, unit="NTU",
                        time=T0 + timedelta(seconds=s), gateway=GW, boot=boot, seq=s, raw=[s]) for s in seqs]


def _publisher(broker: servers.Mosquitto, box: Outbox, boot: str, **kw: object) -> MqttPublisher:
    options: dict[str, object] = {"reconnect_max_s": 1.0, "resend_grace_s": 1.0, "probe_after_s": 1.0,
                                  "probe_max_s": 2.0, **kw}
    pub = MqttPublisher(parse_broker_url(broker.url), SITE, GW, boot, box, ManualClock(INGEST_NOW),
                        **options)  # type: ignore[arg-type]
    pub.start()
    wait_until(lambda: pub.connected, 10, "the publisher to connect")
    return pub


def _stored(db: Path) -> list[tuple[str, int]]:
    """(boot, seq) of every stored reading, by SQL (duplicates would show twice)."""
    con = sqlite3.connect(str(db))
    try:
        return sorted((str(b), int(s)) for b, s in con.execute("SELECT boot, seq FROM readings"))
    finally:
        con.close()


def test_codec_runs_and_refusals() -> None:
    payload = storedack.encode("ingest-1", {"b": [5, 3, 4, 9, 3], "a": [0]})
    assert payload == b'{"stored":[{"boot":"a","seqs":[[0,0]]},{"boot":"b","seqs":[[3,5],[9,9]]}],"by":"ingest-1"}'
    assert storedack.decode(payload) == [("a", 0, 0), ("b", 3, 5), ("b", 9, 9)]
    for bad, why in ((b"{", "not JSON"), (b"[]", '"stored" list'), (b'{"stored":[{"boot":""}]}', "non-empty"),
                     (b'{"stored":[{"boot":"a","seqs":[[2,1]]}]}', "first 2 after last 1"),
                     (b'{"stored":[{"boot":"a","seqs":[[true,1]]}]}', "non-negative JSON integer"),
                     (b'{"stored":[{"boot":"a","seqs":[[1]]}]}', "[first, last]")):
        with pytest.raises(storedack.StoredAckError, match=why):
            storedack.decode(bad)


def test_a_reading_stays_in_the_outbox_after_its_puback_until_ingest_stored_it(tmp_path: Path) -> None:
    broker = servers.mosquitto(tmp_path / "mq")
    broker.start()
    store = SqliteStore(tmp_path / "store.db")
    box = Outbox(tmp_path / "outbox.sqlite3")
    client_id = f"ingest-{next(ids)}"
    pub = None
    try:
        Running(broker, store, client_id=client_id).stop()  # its persistent session now queues the readings
        pub = _publisher(broker, box, "boot-keep")
        box.add(_readings("boot-keep", range(50)))
        pub.wake()
        wait_until(lambda: pub.acknowledged == 50, 10, "50 PUBACKs")
        assert box.depth() == 50 and pub.confirmed == 0  # the broker has them; the store does not yet
        run = Running(broker, store, client_id=client_id)
        try:
            wait_until(lambda: box.depth() == 0, 20, "ingest's confirmations to empty the outbox")
        finally:
            run.stop()
        assert pub.confirmed == 50 and run.ingest.confirmations >= 1
    finally:
        if pub is not None:
            pub.close()
        box.close()
        store.close()
        broker.stop()
    assert _stored(tmp_path / "store.db") == [("boot-keep", s) for s in range(50)]


@pytest.mark.parametrize("after", ["probe", "new_readings"])
def test_broker_sigkilled_while_ingest_is_away_every_reading_stored_once(tmp_path: Path, after: str) -> None:
    """The issue's loss: ingest away, the broker PUBACKs the gateway and holds the readings in memory for
    ingest's session, then dies. ``probe``: no new readings, the gateway's probe finds ingest back and
    re-sends; ``new_readings``: new readings are confirmed while the lost ones are not (a hole)."""
    broker = servers.mosquitto(tmp_path / "mq", extra_conf=FORGETFUL)
    broker.start()
    store = SqliteStore(tmp_path / "store.db")
    box = Outbox(tmp_path / "outbox.sqlite3")
    client_id = f"ingest-{next(ids)}"
    boot = f"boot-{uuid.uuid4().hex[:6]}"
    # hole detection alone must do it in "new_readings": no probe within the test
    pub = _publisher(broker, box, boot, **({"probe_after_s": 600.0, "probe_max_s": 600.0}
                                             if after == "new_readings" else {}))
    run: Running | None = None
    try:
        Running(broker, store, client_id=client_id).stop()
        box.add(_readings(boot, range(100)))
        pub.wake()
        wait_until(lambda: pub.acknowledged == 100, 10, "100 PUBACKs")
        broker.kill()  # SIGKILL: its sessions and the 100 queued messages are gone
        broker.start()
        wait_until(lambda: pub.connected, 20, "the publisher to reconnect")
        run = Running(broker, store, client_id=client_id)  # a new, empty session
        if after == "new_readings":
            box.add(_readings(boot, range(100, 110)))
            pub.wake()
        total = 110 if after == "new_readings" else 100
        wait_until(lambda: box.depth() == 0, 30, "every reading confirmed stored")
    finally:
        if run is not None:
            run.stop()
        pub.close()
        box.close()
        store.close()
        broker.stop()
    assert _stored(tmp_path / "store.db") == [(boot, s) for s in range(total)]
    assert pub.resent_rows >= 100 and pub.confirmed == total


def test_batched_messages_are_confirmed_reading_by_reading(tmp_path: Path) -> None:
    broker = servers.mosquitto(tmp_path / "mq")
    broker.start()
    store = SqliteStore(tmp_path / "store.db")
    box = Outbox(tmp_path / "outbox.sqlite3")
    run = Running(broker, store)
    pub = _publisher(broker, box, "boot-batch", batch=True, batch_gather_s=0.05)
    try:
        # two devices per poll cycle: one message per event time
        for s in range(0, 40):
            (down,) = _readings("boot-batch", range(2 * s, 2 * s + 1))
            up = WireReading(site=SITE, device="turb-up", quantity="turbidity", value=2.0, unit="NTU", time=down.time,
                             gateway=GW, boot="boot-batch", seq=2 * s + 1)
            box.add([down, up])
        pub.wake()
        wait_until(lambda: box.depth() == 0, 20, "the batched readings confirmed")
    finally:
        pub.close()
        run.stop()
        box.close()
        store.close()
        broker.stop()
    assert pub.published < 80 and pub.confirmed == 80  # fewer messages than readings, every reading confirmed
    assert len(_stored(tmp_path / "store.db")) == 80


def test_a_dead_lettered_reading_is_confirmed_handled(tmp_path: Path) -> None:
    """A reading ingest refuses (an unknown device) is kept as a dead letter: the gateway may forget it."""
    broker = servers.mosquitto(tmp_path / "mq")
    broker.start()
    store = SqliteStore(tmp_path / "store.db")
    box = Outbox(tmp_path / "outbox.sqlite3")
    run = Running(broker, store)
    pub = _publisher(broker, box, "boot-dead")
    try:
        box.add([*_readings("boot-dead", range(3)), *_readings("boot-dead", range(3, 4), device="no-such-probe")])
        pub.wake()
        wait_until(lambda: box.depth() == 0, 20, "the good and the refused readings confirmed")
    finally:
        pub.close()
        run.stop()
        box.close()
        store.close()
        broker.stop()
    assert run.ingest.dead_lettered == {"unknown_device": 1}
    assert len(_stored(tmp_path / "store.db")) == 3


def _worker(broker: servers.Mosquitto, store_url: str, client_id: str, group: str,
            log: Path) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "stormwatch", "ingest", "--site", str(REPO / "examples" / "site.yaml"),
            "--broker", broker.url, "--store", store_url, "--client-id", client_id, "--share-group", group,
            "--batch-ms", "50", "--max-future-s", str(10 ** 9), "--max-age-s", str(10 ** 9)]  # T0 is any day
    with log.open("ab") as out:
        proc = subprocess.Popen(argv, cwd=REPO, stdout=out, stderr=subprocess.STDOUT,
                                env={k: v for k, v in os.environ.items() if not k.startswith("STORMWATCH_SIM_")})
    wait_until(lambda: "subscribed to $share/" in log.read_text(errors="replace") or proc.poll() is not None,
               timeout_s=60, what=f"{client_id} subscribed")
    assert proc.poll() is None, log.read_text()
    return proc


def test_shared_subscription_worker_sigkilled_and_never_back_its_share_is_resent(tmp_path: Path) -> None:
    """Two ingest processes share the gateway's readings; one is SIGKILLed and not restarted. Mosquitto
    keeps queueing part of the readings for its session, where nobody reads them: the other worker's
    confirmations show the holes and the gateway re-sends them until the live worker has them all (half of
    each re-send goes to the dead session again; the last ones, with nothing confirmed after them, are
    found by the probe)."""
    broker = servers.mosquitto(tmp_path / "mq")
    broker.start()
    db = tmp_path / "store.db"
    SqliteStore(db).close()
    group = f"g{next(ids)}"
    a = _worker(broker, f"sqlite:///{db}", "worker-a", group, tmp_path / "a.log")
    b = _worker(broker, f"sqlite:///{db}", "worker-b", group, tmp_path / "b.log")
    box = Outbox(tmp_path / "outbox.sqlite3")
    boot = "boot-shared"
    pub = _publisher(broker, box, boot)
    try:
        box.add(_readings(boot, range(200)))
        pub.wake()
        wait_until(lambda: pub.confirmed >= 100, 30, "the first readings confirmed")
        os.kill(b.pid, signal.SIGKILL)
        b.wait(10)
        for start in range(200, 400, 20):  # the gateway goes on polling
            box.add(_readings(boot, range(start, start + 20)))
            pub.wake()
        wait_until(lambda: box.depth() == 0, 90, "every reading confirmed by the live worker")
    finally:
        pub.close()
        box.close()
        for proc in (a, b):
            if proc.poll() is None:
                proc.terminate()
                proc.wait(30)
        broker.stop()
    assert _stored(db) == [(boot, s) for s in range(400)]
    assert pub.resent_rows > 0
