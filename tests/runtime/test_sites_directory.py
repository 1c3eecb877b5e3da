"""Sites as a directory (``--sites DIR``): files added, changed, removed and broken while a service runs."""

from __future__ import annotations

import shutil
import sqlite3
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import paho.mqtt.client as mqtt
import pytest
import yaml
from paho.mqtt.enums import CallbackAPIVersion

from stormwatch import resources, topics
from stormwatch.alerts.sitefile import load_site_file
from stormwatch.app import servers
from stormwatch.config import SiteConfig
from stormwatch.contract import Reading, dump_readings
from stormwatch.errors import InputError
from stormwatch.profiles import ProfileLibrary
from stormwatch.runtime.partition import Partition
from stormwatch.runtime.sitedir import ServiceSites, SiteDirectory
from tests.fleet_support import service, stop
from tests.waits import wait_until

LIBRARY = ProfileLibrary()


def write_site(directory: Path, name: str, site_id: str, gateway: str | None = None, **extra: object) -> Path:
    """A copy of the example site with its own ids, written atomically (temporary name, then rename)."""
    doc = yaml.safe_load(resources.example_site().read_text(encoding="utf-8"))
    doc["site"]["id"] = site_id
    doc["gateway_id"] = gateway or f"gw-{site_id}"
    doc.update(extra)
    path = directory / name
    tmp = directory / f".{name}.tmp"
    tmp.write_text(yaml.safe_dump(doc), encoding="utf-8")
    tmp.replace(path)
    return path


def load(path: Path) -> SiteConfig:
    return load_site_file(path, LIBRARY)


def test_the_directory_follows_added_changed_removed_and_broken_files(tmp_path: Path,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    write_site(tmp_path, "a.yaml", "site-a")
    write_site(tmp_path, "b.yml", "site-b")
    (tmp_path / "notes.txt").write_text("not a site file")
    d = SiteDirectory(tmp_path, load, interval_s=0.1)
    first = d.load()
    assert sorted(c.site.id for c in first.added) == ["site-a", "site-b"] and not first.refused
    assert not d.poll()  # nothing changed: nothing reloaded

    write_site(tmp_path, "c.yaml", "site-c")
    changes = d.poll()
    assert [c.site.id for c in changes.added] == ["site-c"] and not changes.changed and not changes.removed

    write_site(tmp_path, "a.yaml", "site-a", gateway="gw-a-2")
    changes = d.poll()
    assert [c.gateway_id for c in changes.changed] == ["gw-a-2"]

    # a good file broken while editing keeps its last good configuration; its error is logged once
    (tmp_path / "b.yml").write_text("site: [unclosed\n")
    changes = d.poll()
    assert not changes and [p.name for p, _ in changes.refused] == ["b.yml"]
    assert "b.yml" in changes.refused[0][1] and "not valid YAML" in changes.refused[0][1]
    assert d.sites["site-b"].gateway_id == "gw-site-b"
    assert not d.poll().refused  # refused once, not at every look

    # a new broken file is refused with its error; the others keep running
    bad = write_site(tmp_path, "d.yaml", "site-d", jurisdiction_typo="ch133")
    changes = d.poll()
    assert [p for p, _ in changes.refused] == [bad] and "jurisdiction_typo" in changes.refused[0][1]
    assert sorted(d.sites) == ["site-a", "site-b", "site-c"]

    # a second file with a site id already defined is refused; the first keeps it
    write_site(tmp_path, "e.yaml", "site-c", gateway="gw-imposter")
    changes = d.poll()
    assert [p.name for p, _ in changes.refused] == ["e.yaml"] and "already defined by" in changes.refused[0][1]
    assert d.sites["site-c"].gateway_id == "gw-site-c"

    (tmp_path / "c.yaml").unlink()  # now e.yaml's site-c is the only one: it takes over
    changes = d.poll()
    assert [c.gateway_id for c in changes.changed] == ["gw-imposter"]
    (tmp_path / "e.yaml").unlink()
    (tmp_path / "b.yml").unlink()
    changes = d.poll()
    assert sorted(changes.removed) == ["site-b", "site-c"] and sorted(d.sites) == ["site-a"]
    assert "b.yml" in caplog.text


def test_a_partition_keeps_its_own_sites(tmp_path: Path) -> None:
    for i in range(20):
        write_site(tmp_path, f"s{i}.yaml", f"site-{i}")
    parts = [SiteDirectory(tmp_path, load, Partition(k, 3)) for k in (1, 2, 3)]
    owned = [set(p.load() and p.sites) for p in parts]
    assert set().union(*owned) == {f"site-{i}" for i in range(20)}
    assert sum(len(o) for o in owned) == 20  # each site in exactly one part
    named = SiteDirectory(tmp_path, load, Partition.parse(None, ["site-3", "site-7", "site-99"]))
    named.load()
    assert sorted(named.sites) == ["site-3", "site-7"]


def test_service_sites_need_some_sites_and_refuse_a_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="--sites DIR"):
        ServiceSites([], None, load).load()
    with pytest.raises(InputError, match="not a directory"):
        ServiceSites([], tmp_path / "nope", load).load()


def test_ingest_watches_a_site_file_added_to_its_directory_within_seconds(
        tmp_path: Path, mosquitto_server: servers.Mosquitto) -> None:
    sites = tmp_path / "sites"
    sites.mkdir()
    write_site(sites, "first.yaml", "first-site")
    (sites / "broken.yaml").write_text("site: {id: broken}\ndevices: nope\n")
    db = tmp_path / "store.db"
    ingest = service(["ingest", "--sites", str(sites), "--broker", mosquitto_server.url, "--store", f"sqlite:///{db}",
                      "--client-id", f"sites-dir-{uuid.uuid4().hex[:8]}", "--batch-ms", "20"], tmp_path / "ingest.log")
    client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=f"sites-pub-{uuid.uuid4().hex[:8]}")
    client.connect("127.0.0.1", mosquitto_server.port)
    client.loop_start()
    try:
        wait_until(lambda: "subscribed to" in (tmp_path / "ingest.log").read_text(), 30, "ingest subscribed")
        log_text = (tmp_path / "ingest.log").read_text()
        assert "broken.yaml" in log_text  # refused with its error, and ingest runs on

        boot = uuid.uuid4().hex
        seq = iter(range(10_000))

        def publish() -> None:
            r = Reading(site="new-site", device="rain-1", quantity="rain_tips", value=1, unit="{tip}",
                        time=datetime.now(UTC), gateway="gw-new-site", boot=boot, seq=next(seq), raw=1)
            client.publish(topics.readings("new-site", "gw-new-site"), dump_readings([r]), qos=1).wait_for_publish(5)

        def stored() -> int:
            with sqlite3.connect(db) as con:
                return int(con.execute("SELECT COUNT(*) FROM readings WHERE site = 'new-site'").fetchone()[0])

        publish()
        wait_until(lambda: "unknown_site" in (tmp_path / "ingest.log").read_text(), 10, "the unknown site refused")
        added = time.monotonic()
        shutil.copy(write_site(tmp_path, "new.yaml", "new-site"), sites / "new.yaml")

        def accepted() -> bool:
            publish()
            return stored() > 0

        wait_until(accepted, 10, "a reading of the added site stored", every_s=0.2)
        assert time.monotonic() - added < 10
        wait_until(lambda: "1 added (new-site)" in (tmp_path / "ingest.log").read_text(), 5, "the addition logged")
    finally:
        client.loop_stop()
        client.disconnect()
        stop(ingest)



def test_the_web_desk_shows_a_site_file_added_to_its_directory_within_seconds(tmp_path: Path) -> None:
    from stormwatch.web.server import DeskSettings, open_desk

    sites = tmp_path / "sites"
    sites.mkdir()
    write_site(sites, "first.yaml", "first-site")
    (sites / "broken.yaml").write_text("site: [\n")
    desk = open_desk(DeskSettings(sites=[], sites_dir=sites, store_url=f"sqlite:///{tmp_path / 'store.db'}",
                                  state_dir=tmp_path / "state", create_store=True))
    try:
        assert list(desk.sites) == ["first-site"]
        added = time.monotonic()
        write_site(sites, "second.yaml", "second-site")
        wait_until(lambda: "second-site" in desk.sites, 10, "the added site on the desk", every_s=0.1)
        assert time.monotonic() - added < 10
        (sites / "first.yaml").unlink()
        wait_until(lambda: "first-site" not in desk.sites, 10, "the removed site gone", every_s=0.1)
    finally:
        desk.store.close()
