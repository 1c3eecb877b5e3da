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
from starlette.testclient import TestClient

from stormwatch.alerts.workorders import WorkOrders
from stormwatch.app import servers
from stormwatch.clock import ManualClock
from stormwatch.web.accounts import Accounts
from tests.names import RUN
from tests.web_support import NOW, PASSWORD, A, B, build, client, csrf_of, login

_databases = (f"{RUN}_{n}" for n in itertools.count())  # unique to the run (tests/names.py)


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
    r = c.get("/orders/WO-0000000000")
    assert r.status_code == 404
    # "Now" in the sites' zone, as every other page gives it (12:00 EDT), never an unlabelled UTC
    assert re.search(r'id="now">Now: <strong>Tue 02 Jun 2026 12:00 EDT</strong>', r.text), r.text[:1500]
    assert c.post("/orders/WO-0000000000/verify", data={"csrf_token": token}).status_code == 404
    refused = c.post("/orders/WO-0000000000/verify", data={"csrf_token": "forged"})
    assert refused.status_code == 403 and "Tue 02 Jun 2026 12:00 EDT" in refused.text


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


def test_the_site_page_shows_a_window_ending_when_asked(world: dict[str, object]) -> None:
    # The site page's window ends now by default, or at a site-local time (until=). By hand: 12 h
    # ending 2026-06-02 09:00 EDT (13:00 UTC, not included) hold the readings of 01:00-13:00 UTC and
    # no tip (the storm's 50 tips fall in 13:00-13:50 UTC); 12 h ending 12:00 EDT (NOW) hold all 50.
    c = client(world)
    login(c, "sam")
    now = c.get(f"/sites/{A}?hours=12").text
    earlier = c.get(f"/sites/{A}?hours=12&until=2026-06-02T09:00").text
    assert 'value="2026-06-02T09:00"' in earlier and "up to now" in earlier
    assert "hours=24&amp;until=2026-06-02T09:00" in earlier  # the other windows keep the end
    assert earlier.count("<polyline") >= 3 and now.count("<polyline") >= 3  # data in both windows
    cumulative = re.compile(r'<polyline points="([^"]+)" fill="none" stroke="#173f73"')
    last_now = float(cumulative.search(now).group(1).split()[-1].split(",")[1])  # type: ignore[union-attr]
    last_earlier = float(cumulative.search(earlier).group(1).split()[-1].split(",")[1])  # type: ignore[union-attr]
    assert last_now < last_earlier  # a higher cumulative line (smaller y) now: the storm is in this window only
    same = c.get(f"/sites/{A}?hours=12&until=2026-06-02T13:00:00%2B00:00").text  # an offset is taken as given
    assert 'value="2026-06-02T09:00"' in same
    bad = c.get(f"/sites/{A}?until=yesterday")
    assert bad.status_code == 400 and "not a time like 2026-06-02T08:00" in bad.text


def test_pages_list_the_pending_and_recent_orders_not_the_whole_book(world: dict[str, object]) -> None:
    # A's overdue storm inspection is open; two older orders of A were completed: one 30 days
    # before NOW (outside the portfolio's week and the site page's 48 h), one 2 h before NOW.
    from datetime import timedelta

    from stormwatch.contract import Event
    from tests.web_support import NOW

    book = _book(world)
    ids = []
    for days, occurrence in ((30, "basin:old"), (0, "basin:recent")):
        e = Event(kind="basin_cleanout_due", site=A, event_time=NOW - timedelta(days=days, hours=5), rule="R3",
                  citation="Ch. 133 §133-7A(1)", occurrence=occurrence, due_at=NOW)
        order = book.open_for(e, timezone="America/New_York")[0]
        book.complete(order.id, "Ina Inspector", "dredged", at=NOW - timedelta(days=days, hours=2))
        ids.append(order.id)
    book.close()
    old, recent = ids
    c = client(world)
    login(c, "sam")
    for page in ("/", f"/sites/{A}"):
        html = c.get(page).text
        assert world["orders"][A] in html and recent in html and old not in html, page  # type: ignore[index]
    assert old in c.get(f"/sites/{A}?hours=24&until=2026-05-03T12:00").text  # its window: listed


def test_the_portfolio_says_now_in_the_zones_of_its_sites(world: dict[str, object]) -> None:
    # NOW is 16:00 UTC. Both sites in New York: one time, 12:00 EDT. Hilltop moved to Denver: the
    # SMO sees both zones' clocks, west to east (due times on the page are in each site's zone).
    c = client(world)
    login(c, "sam")
    now = re.search(r'<p class="clock" id="now">(.*?)</p>', c.get("/").text, re.S)
    assert now and "<strong>Tue 02 Jun 2026 12:00 EDT</strong>" in now.group(1) and "UTC" not in now.group(1)
    hilltop = Path(str(world["sites"][1]))  # type: ignore[index]
    hilltop.write_text(hilltop.read_text().replace("America/New_York", "America/Denver"))
    c = client(world)
    login(c, "sam")
    now = re.search(r'<p class="clock" id="now">(.*?)</p>', c.get("/").text, re.S)
    assert now and re.sub(r"<[^>]+>", "", now.group(1)).startswith(
        "Now: Tue 02 Jun 2026 10:00 MDT America/Denver · Tue 02 Jun 2026 12:00 EDT America/New_York")
    site = c.get(f"/sites/{A}").text  # a site's page: its own zone
    assert "Now: <strong>Tue 02 Jun 2026 12:00 EDT</strong>" in site


def test_chart_legends_never_overlap_their_titles(world: dict[str, object]) -> None:
    # Each legend item starts after the title's width (13 px bold: at most 8 px a character) on the
    # title's row, or sits on a row of its own under it; every item ends inside the chart.
    from stormwatch.web.charts import LEFT, TITLE_CHAR, W

    c = client(world)
    login(c, "sam")
    html = c.get(f"/sites/{A}").text
    svgs = re.findall(r"<svg .*?</svg>", html, re.S)
    assert len(svgs) == 3
    rows = set()
    for svg in svgs:
        title = re.search(r'class="chart-title">([^<]+)</text>', svg).group(1)  # type: ignore[union-attr]
        keys = [(float(x), float(y)) for x, y in re.findall(r'<rect x="([\d.]+)" y="([\d.]+)"[^>]*class="legend-key"',
                                                                 svg)]
        labels = re.findall(r'class="legend">([^<]+)</text>', svg)
        assert keys and len(keys) == len(labels)
        for (x, y), label in zip(keys, labels, strict=True):
            assert y > 16 or x >= LEFT + TITLE_CHAR * len(title.replace("&amp;", "&")), (title, label)
            assert x + 14 + 6.4 * len(label) <= W, (title, label)
        rows.add(keys[0][1] > 16)
    assert rows == {False, True}  # the short titles keep their legend beside them, the turbidity one not


def test_a_single_pair_sites_charts_keep_their_ids_and_titles(world: dict[str, object]) -> None:
    # A site file's one turbidity_pair and basin (discharge points and basins without ids): its charts
    # have no id in the title, no caption, and the element ids the pages have always had.
    c = client(world)
    login(c, "sam")
    figures = dict(re.findall(r'<figure id="([^"]+)">(.*?)</figure>', c.get(f"/sites/{A}").text, re.S))
    assert list(figures) == ["chart-rain", "chart-turbidity", "chart-basin"]
    assert 'class="chart-title">Turbidity: downstream vs upstream (allowed: ' in figures["chart-turbidity"]
    assert 'class="chart-title">Basin: design storage lost to sediment' in figures["chart-basin"]
    assert not any("<figcaption>" in f for f in figures.values())
    # the overdue storm inspection's evidence: the rain chart (the storm rule's opening event names it)
    order = c.get(f"/orders/{world['orders'][A]}").text  # type: ignore[index]
    assert re.search(r'<figure id="chart-evidence"><svg [^>]*aria-label="Rain per 15 min and cumulative depth"', order)


def test_form_bodies_are_decoded_per_their_charset(world: dict[str, object]) -> None:
    """A url-encoded body that is not percent-encoded is text in its charset (UTF-8 when the
    Content-Type names none, the WHATWG URL Standard), not Latin-1: ``notes=café`` is stored as
    café, never cafÃ©; a percent-encoded é (%C3%A9) is the same é; Latin-1 when the body says so."""
    c = client(world)
    token = login(c, "ina")
    oid = world["orders"][A]  # type: ignore[index]
    for content_type, body, stored in (
            ("application/x-www-form-urlencoded; charset=utf-8", f"csrf_token={token}&notes=café".encode(),
             "café"),
            ("application/x-www-form-urlencoded", f"csrf_token={token}&notes=caf%C3%A9+cr%C3%A8me".encode(),
             "café crème"),
            ("application/x-www-form-urlencoded; charset=ISO-8859-1",
             f"csrf_token={token}&notes=Überlauf".encode("latin-1"), "Überlauf")):
        r = c.post(f"/orders/{oid}/acknowledge", content=body, headers={"Content-Type": content_type})
        assert r.status_code == 303, r.text
        book = _book(world)
        assert book.history(oid)[-1].notes == stored
        book.close()
    r = c.post(f"/orders/{oid}/acknowledge", content=f"csrf_token={token}&notes=caf\xe9".encode("latin-1"),
               headers={"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"})
    assert r.status_code == 400 and "the form is not utf-8 text (its Content-Type says charset=utf-8)" in r.text


def test_metrics_are_served_only_when_asked_and_then_without_a_login(world: dict[str, object]) -> None:
    """/metrics is not there by default (404, not even a login redirect); with metrics on, a
    scraper without a session reads the Prometheus text, counting the page renders made."""
    c = client(world)
    assert c.get("/metrics").status_code == 404
    on = client(world, metrics=True)
    login(on, "ina")
    scraper = TestClient(on.app, follow_redirects=False)  # the same desk, no session cookie

    def portfolio_renders() -> float:
        r = scraper.get("/metrics")
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
        found = re.search(r'^stormwatch_web_render_seconds_count\{page="portfolio"\} (\S+)$', r.text, re.M)
        return float(found.group(1)) if found else 0.0

    before = portfolio_renders()
    assert on.get("/").status_code == 200 and on.get("/").status_code == 200
    assert portfolio_renders() == before + 2
