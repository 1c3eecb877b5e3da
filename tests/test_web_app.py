"""The web desk over HTTP: pages, per-site authorization, CSRF, sessions, uploads (Starlette's test
client against the real application, store, work-order book and accounts)."""

from __future__ import annotations

import io
import itertools
import re
import sqlite3
from pathlib import Path

import pytest
from PIL import Image

from stormwatch.alerts.workorders import WorkOrders
from stormwatch.app import servers
from stormwatch.clock import ManualClock
from stormwatch.web.accounts import Accounts
from tests.web_support import NOW, PASSWORD, A, B, build, client, csrf_of, login

_databases = itertools.count()


@pytest.fixture()
def world(tmp_path: Path) -> dict[str, object]:
    return build(tmp_path)


@pytest.fixture(params=[pytest.param("sqlite"), pytest.param("influx1", marks=pytest.mark.influxdb)])
def any_store_world(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, object]:
    """The world on the embedded SQLite store, and on a database of a real InfluxDB 1.x (the
    production stack's store, docker-compose.yml)."""
    if request.param == "sqlite":
        return build(tmp_path)
    srv: servers.InfluxDB1 = request.getfixturevalue("influx_server")
    return build(tmp_path, srv.store_url(f"web_{next(_databases)}_{id(tmp_path) % 10**6}"))


def _png(size: tuple[int, int] = (64, 48)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, (120, 90, 60)).save(buf, "PNG")
    return buf.getvalue()


def _book(world: dict[str, object]) -> WorkOrders:
    return WorkOrders(Path(str(world["state"])) / "alerts.db", ManualClock(NOW))


def test_pages_need_a_session_and_an_expired_one_goes_back_to_login(world: dict[str, object]) -> None:
    c = client(world)
    r = c.get("/")
    assert r.status_code == 303 and r.headers["location"].startswith("/login?next=/")
    accounts = Accounts(Path(str(world["state"])) / "web.db", idle_minutes=30)
    c2 = client(world, idle_minutes=30)
    c2.cookies.set("stormwatch_session", accounts.start_session(accounts.get("ina")))
    assert c2.get("/").status_code == 200
    # 31 minutes without a request (the session's times moved back in its database)
    db = sqlite3.connect(Path(str(world["state"])) / "web.db")
    db.execute("UPDATE sessions SET last_seen = last_seen - 31 * 60")
    db.commit()
    db.close()
    r = c2.get(f"/orders/{world['orders'][A]}")  # type: ignore[index]
    assert r.status_code == 303
    assert r.headers["location"] == f"/login?next=/orders/{world['orders'][A]}&expired=1"  # type: ignore[index]
    assert "Your session has ended" in c2.get(r.headers["location"]).text
    assert accounts.session("not-a-token") is None
    accounts.close()


def test_portfolio_shows_each_site_now_and_a_gap_as_unknown(any_store_world: dict[str, object]) -> None:
    c = client(any_store_world)
    login(c, "sam")
    html = c.get("/").text
    rows = dict(re.findall(r'<tr class="row-\w+" data-site="([\w-]+)">(.*?)</tr>', html, re.S))
    assert set(rows) == {A, B}
    a, b = (re.sub(r"\s+", " ", rows[s]) for s in (A, B))
    assert "0.50 in" in a and "50 tips" in a  # 50 tips × 0.01 in, 24 h of readings a minute
    assert "48.4 %" in a  # V(2.5 ft)/V(4 ft) of 40×20 ft, 3:1: 3312.5/6848 ft³
    assert "down 16.0 / up 10.0 NTU" in a and "above the allowed 15.0 NTU" in a  # WAC: 10 + 5 NTU
    assert "1 open, <strong>1 overdue</strong>" in a
    # B's devices stopped 3 h ago: no rain recorded, and it is UNKNOWN, not 0.00 in
    assert "0.00 in" not in b and b.count("UNKNOWN") == 3
    assert "48.4 % at its last reading, Tue 02 Jun 2026 08:55 EDT" in b
    assert "silent: rain-1, turb-up, turb-down, basin-level" in b


def test_inspector_sees_only_their_sites(any_store_world: dict[str, object]) -> None:
    c = client(any_store_world)
    login(c, "ina")
    html = c.get("/").text
    assert f'data-site="{A}"' in html and f'data-site="{B}"' not in html
    assert c.get(f"/sites/{B}").status_code == 403
    assert c.get("/sites/nowhere").status_code == 404
    site = c.get(f"/sites/{A}")
    assert site.status_code == 200 and site.text.count("<svg") == 3 and "OVERDUE" in site.text


def test_contractor_of_one_site_is_refused_another_sites_order_and_every_action(world: dict[str, object]) -> None:
    c = client(world)
    token = login(c, "carl")
    mine, theirs = world["orders"][A], world["orders"][B]  # type: ignore[index]
    assert c.get(f"/orders/{mine}").status_code == 200
    assert 'id="acknowledge"' not in c.get(f"/orders/{mine}").text  # read-only
    r = c.get(f"/orders/{theirs}")
    assert r.status_code == 403 and "not one of your sites" in r.text
    assert c.get(f"/orders/{theirs}/print").status_code == 403
    assert c.get(f"/orders/{theirs}/photos/1").status_code == 403
    for oid in (theirs, mine):  # a contractor may act on no order, its own site's included
        for action, data in (("acknowledge", {}), ("complete", {"notes": "done"}), ("verify", {})):
            r = c.post(f"/orders/{oid}/{action}", data={"csrf_token": token, **data})
            assert r.status_code == 403, (oid, action)
        r = c.post(f"/orders/{oid}/photos", data={"csrf_token": token},
                   files={"photo": ("a.png", _png(), "image/png")})
        assert r.status_code == 403
    book = _book(world)
    assert [o.status for o in book.list()] == ["open", "open"]
    assert all(not book.photos(o.id) for o in book.list())
    book.close()


def test_post_without_the_csrf_token_is_refused(world: dict[str, object]) -> None:
    c = client(world)
    login(c, "ina")
    oid = world["orders"][A]  # type: ignore[index]
    assert c.post(f"/orders/{oid}/acknowledge", data={}).status_code == 403
    assert c.post(f"/orders/{oid}/acknowledge", data={"csrf_token": "forged"}).status_code == 403
    r = c.post(f"/orders/{oid}/complete", data={"notes": "x"})
    assert r.status_code == 403 and "CSRF" in r.text
    book = _book(world)
    assert book.get(oid).status == "open"
    book.close()
    # the login form too
    anon = client(world)
    r = anon.post("/login", data={"username": "ina", "password": PASSWORD, "next": "/"})
    assert r.status_code == 403 and "stormwatch_session" not in r.headers.get("set-cookie", "")


def test_unknown_order_is_404(world: dict[str, object]) -> None:
    c = client(world)
    token = login(c, "sam")
    assert c.get("/orders/WO-0000000000").status_code == 404
    assert c.post("/orders/WO-0000000000/verify", data={"csrf_token": token}).status_code == 404


def test_oversized_and_non_image_uploads_are_refused_with_a_message(world: dict[str, object]) -> None:
    c = client(world, max_photo_bytes=100_000)
    token = login(c, "ina")
    oid = world["orders"][A]  # type: ignore[index]
    big = _png((1200, 1200)) + b"\0" * 100_000
    r = c.post(f"/orders/{oid}/complete", data={"csrf_token": token, "notes": "fence ok"},
               files={"photo": ("big.png", big, "image/png")})
    assert r.status_code == 413
    assert "Photo refused: big.png is larger than 97.7 KiB, the most a photo may be" in r.text
    r = c.post(f"/orders/{oid}/complete", data={"csrf_token": token, "notes": "fence ok"},
               files={"photo": ("report.jpg", b"%PDF-1.7 not an image", "image/jpeg")})
    assert r.status_code == 415
    assert "Photo refused: report.jpg is not an image; photos must be JPEG, PNG or WebP images" in r.text
    gif = io.BytesIO()
    Image.new("RGB", (4, 4)).save(gif, "GIF")
    r = c.post(f"/orders/{oid}/photos", data={"csrf_token": token},
               files={"photo": ("a.gif", gif.getvalue(), "image/gif")})
    assert r.status_code == 415 and "is a GIF file" in r.text
    book = _book(world)
    assert book.get(oid).status == "open" and book.photos(oid) == []
    book.close()


def test_inspector_acknowledges_and_completes_with_a_photo_and_the_smo_verifies(world: dict[str, object]) -> None:
    c = client(world)
    token = login(c, "ina")
    oid = world["orders"][A]  # type: ignore[index]
    page = c.get(f"/orders/{oid}").text
    assert "Wed 02 Jun" not in page and "Tue 02 Jun 2026 11:30 EDT" in page  # due NOW - 30 min, site-local
    assert "within 24 hours of any storm event producing 0.5 inches" in page  # the ordinance's words
    r = c.post(f"/orders/{oid}/acknowledge", data={"csrf_token": token, "notes": "on my way"})
    assert r.status_code == 303 and r.headers["location"] == f"/orders/{oid}?done=acknowledged"
    png = _png()
    r = c.post(f"/orders/{oid}/complete", data={"csrf_token": token, "notes": "silt fence repaired"},
               files={"photo": ("fence.png", png, "application/octet-stream")})
    assert r.status_code == 303, r.text
    photo = c.get(f"/orders/{oid}/photos/1")
    assert photo.content == png and photo.headers["content-type"] == "image/png"
    book = _book(world)
    order = book.get(oid)
    assert (order.status, order.inspector, order.notes, order.acknowledged_by) == \
        ("completed", "Ina Inspector", "silt fence repaired", "Ina Inspector")
    assert [(h.by, h.action) for h in book.history(oid)] == [
        ("alert engine", "opened"), ("Ina Inspector", "acknowledged"), ("Ina Inspector", "photo attached"),
        ("Ina Inspector", "completed")]
    book.close()
    assert c.post(f"/orders/{oid}/verify", data={"csrf_token": token}).status_code == 403  # inspectors don't verify
    smo = client(world)
    smo_token = login(smo, "sam")
    assert smo.post(f"/orders/{oid}/acknowledge", data={"csrf_token": smo_token}).status_code == 403
    r = smo.post(f"/orders/{oid}/verify", data={"csrf_token": smo_token, "notes": "log book seen"})
    assert r.status_code == 303
    page = smo.get(f"/orders/{oid}?done=verified").text
    assert "verified by Sam SMO" in page and "fence.png" in page
    printed = smo.get(f"/orders/{oid}/print").text
    assert "silt fence repaired" in printed and "Ch. 133 §133-7A(2)" in printed and "<svg" in printed
    done = re.sub(r"\s+", " ", smo.get("/").text)
    assert "0 open" in done


def test_logout_ends_the_session(world: dict[str, object]) -> None:
    c = client(world)
    token = login(c, "ina")
    assert c.post("/logout", data={"csrf_token": token}).status_code == 303
    assert c.get("/").status_code == 303


def test_a_password_change_ends_the_users_sessions(world: dict[str, object]) -> None:
    c = client(world)
    login(c, "ina")
    accounts = Accounts(Path(str(world["state"])) / "web.db")
    accounts.set_password("ina", "another long password")
    accounts.close()
    r = c.get("/")
    assert r.status_code == 303 and "expired=1" in r.headers["location"]
    assert csrf_of(c.get("/login").text)


@pytest.mark.influxdb
def test_an_influxdb_store_away_or_misnamed_is_told_in_one_line(tmp_path: Path, own_influx: servers.InfluxDB1) -> None:
    from stormwatch.web.server import DeskSettings, DeskSetupError, open_desk

    world = build(tmp_path, own_influx.store_url("desk"))
    settings = {"sites": world["sites"], "state_dir": world["state"]}
    with pytest.raises(DeskSetupError, match=r"the server has no database 'dsek' \(the database ingest writes"):
        open_desk(DeskSettings(store_url=own_influx.store_url("dsek"), **settings))  # type: ignore[arg-type]
    c = client(world)
    login(c, "sam")
    own_influx.stop()  # the store goes away while the desk runs: a page says so (503), no traceback
    r = c.get("/")
    assert r.status_code == 503 and "The readings store did not answer" in r.text
    with pytest.raises(DeskSetupError, match=r"^--store influx1://127\.0\.0\.1:.*/desk: .*InfluxDB"):
        open_desk(DeskSettings(store_url=own_influx.store_url("desk"), **settings))  # type: ignore[arg-type]
    own_influx.start()
    assert client(world).get("/login").status_code == 200
