"""The inspector's desk in a real browser: headless Chromium (Debian's chromium + chromium-driver,
driven by Selenium) against `stormwatch demo --web` and then `stormwatch web` over the demo's state.

An inspector logs in, sees the overdue storm inspection of the demo run, acknowledges it, completes it
with a photo, and sees it completed in the portfolio. Screenshots of the portfolio, the site page (the
demo's window, its charts with data) and the order page are kept as test artifacts in
``$STORMWATCH_TEST_ARTIFACTS/web-browser`` (default ``test-artifacts/`` in the checkout, git-ignored;
the path is printed, and ``.ci/run`` lists them at its end).

Skipped without Chromium, except under CI=true (.ci/run installs it).
"""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.request
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
import yaml
from PIL import Image

from stormwatch.resources import example_site
from stormwatch.simulators.scenario import load_scenario
from stormwatch.web.server import free_port
from tests.conftest import artifacts_dir
from tests.waits import wait_until

pytestmark = pytest.mark.slow  # a browser against stormwatch processes

CHROMIUM, DRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--window-size=1300,1500")


def _need_browser() -> None:
    if CHROMIUM.exists() and DRIVER.exists():
        return
    msg = "Chromium not installed (Debian: apt-get install chromium chromium-driver)"
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true but {msg}")
    pytest.skip(msg)


def _interruptible() -> None:
    """In the child: Ctrl-C as at a terminal. A run started as a background job (``cmd &`` in a
    script, as CI runners do) inherits SIGINT ignored, and Python then installs no KeyboardInterrupt."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _stormwatch(*args: str, **kw: object) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "stormwatch", *args], preexec_fn=_interruptible,  # type: ignore[call-overload]
                            **kw)


def _answers(url: str) -> bool:
    try:
        return urllib.request.urlopen(url, timeout=2).status == 200
    except OSError:
        return False


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, object]]:
    """A demo run with --web: its web desk answers while the run goes on, and the SMO's portfolio
    and site page are read in Chromium every few simulated hours of it (``live``); the state is kept."""
    _need_browser()
    root = tmp_path_factory.mktemp("web-demo")
    work = root / "demo"
    port = free_port()
    out, err = open(root / "demo.out", "wb"), open(root / "demo.err", "wb")
    with _chromium(root / "chromium-live") as d:  # started first: the run is short
        proc = _stormwatch("demo", "--workdir", str(work), "--web", "--web-port", str(port), stdout=out, stderr=err)

        def over() -> bool:
            return "still serves it" in (root / "demo.out").read_text() or proc.poll() is not None

        try:
            wait_until(lambda: "web desk:" in (root / "demo.err").read_text(), 180, "the demo's web desk")
            line = next(x for x in (root / "demo.err").read_text().splitlines() if "web desk:" in x)
            passwords = dict(re.findall(r"(\w+) / (\S+?)(?:,|\))", line))
            assert set(passwords) == {"inspector", "smo"}, line
            wait_until(lambda: _answers(f"http://127.0.0.1:{port}/login"), 60, "the desk answering during the run")
            live = _watch(d, f"http://127.0.0.1:{port}", passwords["smo"], work / "stormwatch.db", over)
            wait_until(over, 600, "the end of the demo run")
            assert proc.poll() is None, (root / "demo.err").read_text()[-2000:]
            assert "Summary" in (root / "demo.out").read_text()
        finally:
            proc.send_signal(signal.SIGINT)
            proc.wait(30)
            out.close()
            err.close()
    yield {"work": work, "passwords": passwords, "root": root, "live": live}


@pytest.fixture(scope="module")
def desk(demo: dict[str, object]) -> Iterator[str]:
    """`stormwatch web` over the demo's state, judged at today's date (--wall-time): every order of
    the June demo is overdue."""
    work = demo["work"]
    port = free_port()
    log = open(Path(str(demo["root"])) / "web.err", "wb")
    proc = _stormwatch("web", "--store", f"sqlite:///{work}/stormwatch.db", "--state-dir", str(work), "--port",
                       str(port), "--wall-time", stdout=subprocess.DEVNULL, stderr=log)
    try:
        wait_until(lambda: _answers(f"http://127.0.0.1:{port}/login"), 60, "stormwatch web")
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(30)
        log.close()


@contextmanager
def _chromium(profile: Path) -> Iterator[object]:
    """Headless Chromium driven by Selenium, its profile in ``profile``."""
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = str(CHROMIUM)
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    driver = webdriver.Chrome(options=options, service=Service(str(DRIVER)))
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture()
def browser(tmp_path: Path) -> Iterator[object]:
    with _chromium(tmp_path / "chromium-profile") as driver:
        yield driver


# -- what the desk shows of the devices, and whether the store explains it ----------------------

SITE, ZONE = "riverside-commons", ZoneInfo("America/New_York")
#: The desk's silence allowance, in poll intervals (docs/web.md).
SILENCE_POLLS = 2
#: How far the demo's stored data moves (simulated) between two looks at its desk: up to 16 looks a run.
LOOK_EVERY = timedelta(hours=2)


@dataclass(frozen=True)
class Seen:
    """What one page load showed of the devices.

    Attributes:
        page: ``portfolio`` or ``site``.
        clock: the page's "Now" line.
        data_time: the time the page says it judged the devices at (``#data-time``).
        silent: the devices the portfolio lists as silent.
        unknown: ``(column, text)`` of the portfolio's cells shown in the unknown state.
        gaps: the site page's hatched no-data stretches, as titled (``no data from DEVICE: START – END``).
        loaded: the wall-clock times (``time.time()``) before and after the page load.
    """

    page: str
    clock: str
    data_time: datetime
    silent: tuple[str, ...] = ()
    unknown: tuple[tuple[str, str], ...] = ()
    gaps: tuple[str, ...] = ()
    loaded: tuple[float, float] = (0.0, 0.0)


def _data_time(d: object) -> datetime:
    from selenium.webdriver.common.by import By

    stamp = d.find_element(By.CSS_SELECTOR, "#data-time time").get_attribute("datetime")  # type: ignore[attr-defined]
    return datetime.fromisoformat(str(stamp))


def _look(d: object, base: str) -> list[Seen]:
    """The portfolio's row of the demo site and its site page, as the SMO sees them now."""
    from selenium.webdriver.common.by import By

    t0 = time.time()
    d.get(base + "/")  # type: ignore[attr-defined]
    t1 = time.time()
    row = d.find_element(By.CSS_SELECTOR, f'tr[data-site="{SITE}"]')  # type: ignore[attr-defined]
    named = re.search(r"silent: (.+)", row.find_element(By.CSS_SELECTOR, 'td[data-label="Site"]').text)
    unknown = tuple((c.get_attribute("data-label"), c.text) for c in row.find_elements(By.CSS_SELECTOR, "td.s-unknown")
                    # the demo's desk watches no broker: its gateway's status is not known, whatever the devices
                    if c.get_attribute("data-label") != "Gateway")
    portfolio = Seen("portfolio", d.find_element(By.ID, "now").text, _data_time(d),  # type: ignore[attr-defined]
                     tuple(named.group(1).split(", ")) if named else (), unknown, loaded=(t0, t1))
    t0 = time.time()
    d.get(f"{base}/sites/{SITE}")  # type: ignore[attr-defined]
    t1 = time.time()
    gaps = tuple(str(t.get_attribute("textContent"))
                 for t in d.find_elements(By.CSS_SELECTOR, "rect.gap title"))  # type: ignore[attr-defined]
    return [portfolio, Seen("site", d.find_element(By.ID, "now").text, _data_time(d),  # type: ignore[attr-defined]
                           gaps=gaps, loaded=(t0, t1))]


def _newest(db: Path) -> datetime | None:
    """The newest reading stored (``None``: none yet, or no store yet)."""
    if not db.exists():
        return None
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30) as c:
        (us,) = c.execute("SELECT max(time_us) FROM readings").fetchone()
    return None if us is None else datetime.fromtimestamp(us / 1e6, UTC)


def _watch(d: object, base: str, password: str, db: Path, over: Callable[[], bool]) -> list[Seen]:
    """Log in as the SMO and look at the desk each time the run stored :data:`LOOK_EVERY` more, until
    it is over."""
    from selenium.webdriver.support.ui import WebDriverWait

    d.get(base + "/")  # type: ignore[attr-defined]
    _log_in(d, WebDriverWait(d, 30), "smo", password)
    seen: list[Seen] = []
    while not over():
        seen += _look(d, base)
        wait_until(_moved_on(db, over), 600, "the demo run moving on", every_s=0.2, ignore=(sqlite3.Error,))
    return seen


def _moved_on(db: Path, over: Callable[[], bool]) -> Callable[[], bool]:
    """A condition: the run stored :data:`LOOK_EVERY` more than now, or it is over."""
    since = _newest(db) or datetime.min.replace(tzinfo=UTC)
    return lambda: over() or (_newest(db) or since) >= since + LOOK_EVERY


@dataclass(frozen=True)
class Stored:
    """The demo's readings after the run: ``(time, received)`` by device -- ``received`` is when ingest
    took it, on the run's simulated clock (``sim_start`` at wall time ``wall_start``, ``speed``)."""

    readings: dict[str, list[tuple[datetime, datetime]]]
    sim_start: datetime
    wall_start: float
    speed: float

    def by(self, wall: float) -> dict[str, list[datetime]]:
        """The reading times ingest had taken a second before wall time ``wall`` (its commit follows)."""
        until = self.sim_start + timedelta(seconds=(wall - 1.0 - self.wall_start) * self.speed)
        return {d: [t for t, got in rows if got <= until] for d, rows in self.readings.items()}


def _stored(work: Path) -> Stored:
    readings: dict[str, list[tuple[datetime, datetime]]] = defaultdict(list)
    with sqlite3.connect(f"file:{work / 'stormwatch.db'}?mode=ro", uri=True) as c:
        for device, us, got in c.execute("SELECT device, time_us, received_at_us FROM readings WHERE site = ? "
                                         "ORDER BY time_us", (SITE,)):
            readings[device].append((datetime.fromtimestamp(us / 1e6, UTC), datetime.fromtimestamp(got / 1e6, UTC)))
    with sqlite3.connect(f"file:{work / 'alerts.db'}?mode=ro", uri=True) as c:
        clock = dict(c.execute("SELECT key, value FROM engine_clock").fetchall())
    return Stored(readings, datetime.fromisoformat(clock["sim_start"]), float(clock["wall_start"]),
                  float(clock["speed"]))


def _gap(title: str, year: int) -> tuple[str, datetime, datetime]:
    """``no data from rain-1: 01 Jun 05:03 – 01 Jun 05:07 EDT`` → device, start, end."""
    m = re.fullmatch(r"no data from (\S+): (\d\d \w{3} \d\d:\d\d) – (\d\d \w{3} \d\d:\d\d) \w+", title)
    assert m, title
    start, end = (datetime.strptime(f"{year} {t}", "%Y %d %b %H:%M").replace(tzinfo=ZONE) for t in m.group(2, 3))
    return m.group(1), start, end


def _unexplained(seen: Seen, everything: Stored, run_start: datetime) -> list[str]:
    """What ``seen`` showed silent, UNKNOWN or hatched that no missed poll of the device explains:
    the store held a reading (taken by ingest before the page was asked for) where the page said
    there was none, by each device's own poll interval from the site file; or the page judged at a
    time past every reading stored when it was made (a clock running ahead of the data).

    Readings a loaded machine's pipeline delivers after the page was made (on this 2-core machine up
    to ~3,600 simulated s after their poll, past the engine's lateness) are not held against it."""
    devices = {d["id"]: d for d in yaml.safe_load(example_site().read_text())["devices"]}
    poll = {name: timedelta(seconds=d["poll_interval_s"]) for name, d in devices.items()}
    at, out = seen.data_time, []
    stored = everything.by(seen.loaded[0])
    reached = max((t for times in everything.by(seen.loaded[1] + 1.0).values() for t in times), default=run_start)
    if at > reached:
        out.append(f"{seen.page} judged at {at}, past the newest reading stored then, {reached}")

    def heard(device: str, start: datetime, end: datetime) -> list[datetime]:
        return [t for t in stored.get(device, []) if start <= t <= end]

    for device in seen.silent:
        if heard(device, at - SILENCE_POLLS * poll[device], at):
            out.append(f"{seen.page} at {at}: {device} listed silent, but it has readings in the "
                       f"{SILENCE_POLLS} polls before")
    cells = {"Turbidity": ("turb-up", "turb-down"), "Basin storage lost": ("basin-level",)}
    for label, text in seen.unknown:
        if label == "Rain, last 24 h":
            # the gauge's missed polls in the day up to the judged time (a little longer than the
            # desk's day, which ends at its clock: missed by one poll more, at most)
            start = max(at - timedelta(hours=24), run_start)
            missing = at - start - len(heard("rain-1", start, at)) * poll["rain-1"]
            if missing <= poll["rain-1"]:
                out.append(f"{seen.page} at {at}: rain {text!r}, but the gauge missed {missing} at most")
        elif not set(cells.get(label, ())) & set(seen.silent):
            out.append(f"{seen.page} at {at}: {label} {text!r} with none of its devices silent")
    for title in seen.gaps:
        device, start, end = _gap(title, run_start.year)
        if start < run_start or end > at or heard(device, start + timedelta(seconds=1), end - timedelta(seconds=1)):
            out.append(f"{seen.page} at {at}: {title!r}, but the store holds readings in it or it is outside "
                       f"the run ({run_start} to {at})")
    return out


def test_inspector_completes_the_overdue_storm_inspection_with_a_photo(
        demo: dict[str, object], desk: str, browser: object, tmp_path_factory: pytest.TempPathFactory) -> None:
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.remote.webdriver import WebDriver
    from selenium.webdriver.support.ui import WebDriverWait

    d: WebDriver = browser  # type: ignore[assignment]
    shots = artifacts_dir("web-browser")
    print(f"\nscreenshots: {shots}")
    # a form POST navigates: an element found on the old page may go stale while the wait polls
    wait = WebDriverWait(d, 30, ignored_exceptions=(StaleElementReferenceException, NoSuchElementException))

    d.get(desk + "/")
    wait.until(lambda d: d.find_elements(By.ID, "username"))
    d.find_element(By.ID, "username").send_keys("inspector")
    d.find_element(By.ID, "password").send_keys(str(demo["passwords"]["inspector"]))  # type: ignore[index]
    d.find_element(By.ID, "login").click()
    wait.until(lambda d: d.find_elements(By.ID, "portfolio"))
    row = d.find_element(By.CSS_SELECTOR, 'tr[data-site="riverside-commons"]')
    assert "4 open, 4 overdue" in row.text  # the demo's four orders, all past due today
    storm = d.find_element(By.XPATH, "//tr[@class='order'][td[contains(., 'storm inspection')]]")
    assert "OVERDUE" in storm.text and storm.get_attribute("data-status") == "open"
    d.save_screenshot(str(shots / "1-portfolio.png"))

    d.find_element(By.LINK_TEXT, "Riverside Commons, Phase 2").click()
    wait.until(lambda d: d.find_elements(By.ID, "chart-rain"))
    assert len(d.find_elements(By.CSS_SELECTOR, "figure svg.chart")) == 3
    # the desk judges at today's date (--wall-time): the last 48 h hold no reading of the June demo.
    # Ask for the 48 h ending at the demo's end (site-local), through the page's own form.
    scenario = load_scenario("default")
    until = d.find_element(By.ID, "until")
    d.execute_script("arguments[0].value = arguments[1]", until,
                     scenario.end.astimezone(ZoneInfo("America/New_York")).strftime("%Y-%m-%dT%H:%M"))
    d.find_element(By.ID, "show-window").click()
    wait.until(lambda d: "until=" in d.current_url and d.find_elements(By.ID, "chart-basin"))
    assert "hours=48" in d.current_url and "up to now" in d.find_element(By.CSS_SELECTOR, "nav.windows").text
    charts = {f.get_attribute("id"): f.find_element(By.CSS_SELECTOR, "svg.chart")
              for f in d.find_elements(By.CSS_SELECTOR, "figure[id^=chart-]")}
    assert set(charts) == {"chart-rain", "chart-turbidity", "chart-basin"}
    for name, svg in charts.items():  # every chart has data: a line through many points
        points = [len(p.get_attribute("points").split()) for p in svg.find_elements(By.TAG_NAME, "polyline")]
        assert points and max(points) > 10, (name, points)
    bars = charts["chart-rain"].find_elements(By.CSS_SELECTOR, 'rect[fill="#3b7dd8"]')
    assert bars, "no rain bar: the demo's storm is not in the window"
    d.save_screenshot(str(shots / "2-site.png"))

    link = d.find_element(By.XPATH, "//tr[@class='order'][td[contains(., 'storm inspection')]]//a")
    oid = link.text
    link.click()
    wait.until(lambda d: d.find_elements(By.ID, "acknowledge"))
    assert "OVERDUE" in d.find_element(By.ID, "due").text
    # the order's deadline (last tip + 24 h: 05:00 UTC when the demo's poll of the last tip's slot ran
    # on time; later when a loaded machine's gateway skipped slots and counted the tip at its next
    # poll -- the stored reading says when), shown site-local
    from stormwatch.alerts.workorders import WorkOrders
    from stormwatch.clock import ManualClock
    from stormwatch.display import local_time

    work = demo["work"]
    assert isinstance(work, Path)
    order = WorkOrders(work / "alerts.db", ManualClock(datetime(2026, 6, 3, tzinfo=UTC))).get(oid)
    with sqlite3.connect(f"file:{work / 'stormwatch.db'}?mode=ro", uri=True) as c:
        (last_tip,) = c.execute("SELECT max(time_us) FROM readings WHERE device = 'rain-1' AND value > 0").fetchone()
    assert order.due_at == datetime.fromtimestamp(last_tip / 1e6, UTC) + timedelta(hours=24)
    assert order.due_at - datetime(2026, 6, 3, 5, tzinfo=UTC) < timedelta(minutes=30)
    assert local_time(order.due_at, "America/New_York") in d.find_element(By.ID, "due").text
    assert "within 24 hours of any storm event producing 0.5 inches" in d.find_element(By.ID, "ordinance").text
    d.save_screenshot(str(shots / "3-order.png"))
    # read top-down: what, why and when it is due come before the forms that act on it
    assert d.find_element(By.ID, "due").location["y"] < d.find_element(By.ID, "ack-form").location["y"]
    # the storm's tip readings summarized in a row; every one behind a closed disclosure
    tips = [item for item in order.evidence if "tips" in item]
    first = d.find_element(By.CSS_SELECTOR, "#evidence-summary tbody tr")
    assert f"{len(tips)} tip readings" in first.text and f"{sum(int(i['tips']) for i in tips)} tips" in first.text
    assert len(d.find_elements(By.CSS_SELECTOR, "#evidence-summary tbody tr")) <= 8
    full = d.find_element(By.ID, "evidence-full")
    assert full.get_attribute("open") is None and len(full.find_elements(By.CSS_SELECTOR, "tbody tr")) == len(tips)
    # the chart shades the order's own stretch: its first to its last tip, site-local
    shade = d.find_element(By.CSS_SELECTOR, "#chart-evidence rect.order-window title").get_attribute("textContent")
    zone = ZoneInfo("America/New_York")
    stamps = sorted(datetime.fromisoformat(str(i["time"]).replace("Z", "+00:00")) for i in tips)
    assert f"{stamps[0].astimezone(zone):%d %b %H:%M} – {stamps[-1].astimezone(zone):%d %b %H:%M %Z}" in str(shade)

    d.find_element(By.ID, "ack-notes").send_keys("on my way")
    d.find_element(By.ID, "acknowledge").click()
    wait.until(lambda d: "acknowledged" in d.find_element(By.ID, "status").text)

    photo = tmp_path_factory.mktemp("photo") / "silt-fence.jpg"
    Image.new("RGB", (320, 240), (110, 90, 60)).save(photo, "JPEG")
    d.find_element(By.ID, "complete-notes").send_keys("Silt fence at the outfall re-staked; basin inlet cleared.")
    d.find_element(By.ID, "complete-photo").send_keys(str(photo))
    d.find_element(By.ID, "complete").click()
    wait.until(lambda d: "completed" in d.find_element(By.ID, "status").text)
    img = d.find_element(By.CSS_SELECTOR, "figure.photo img")
    assert d.execute_script("return arguments[0].naturalWidth", img) == 320  # the stored photo is served
    history = d.find_element(By.ID, "history").text
    assert "Demo Inspector acknowledged" in history and "photo attached" in history and "completed" in history
    d.save_screenshot(str(shots / "4-order-completed.png"))
    # completed months after its June deadline (the desk's clock is today's): LATE, by the log book's figure
    done_order = WorkOrders(work / "alerts.db", ManualClock(datetime(2026, 6, 3, tzinfo=UTC))).get(oid)
    assert done_order.completed_at is not None and done_order.due_at is not None
    late = f"LATE by {_hours_minutes(done_order.completed_at - done_order.due_at)}"
    assert late in d.find_element(By.ID, "late").text and "completed" in d.find_element(By.ID, "status").text

    d.find_element(By.LINK_TEXT, "Portfolio").click()
    wait.until(lambda d: d.find_elements(By.ID, "portfolio"))
    row = d.find_element(By.CSS_SELECTOR, 'tr[data-site="riverside-commons"]')
    assert "3 open, 3 overdue" in row.text
    done = d.find_element(By.CSS_SELECTOR, f'tr.order[data-order="{oid}"]')
    assert done.get_attribute("data-status") == "completed" and "OVERDUE" not in done.text
    d.save_screenshot(str(shots / "5-portfolio-after.png"))
    assert late in done.text
    for name in ("1-portfolio.png", "2-site.png", "3-order.png"):
        assert (shots / name).stat().st_size > 10_000

    # the SMO verifying it sees the lateness on the order page, beside the verify button, and on paper
    d.find_element(By.CSS_SELECTOR, "button.link").click()
    _log_in(d, wait, "smo", str(demo["passwords"]["smo"]))  # type: ignore[index]
    d.get(f"{desk}/orders/{oid}")
    wait.until(lambda d: d.find_elements(By.ID, "verify"))
    assert late in d.find_element(By.ID, "status").text
    assert f"completed {late}" in d.find_element(By.ID, "verify-late").text
    d.save_screenshot(str(shots / "6-verify-late.png"))
    d.get(f"{desk}/orders/{oid}/print")
    wait.until(lambda d: d.find_elements(By.ID, "status"))
    assert late in d.find_element(By.ID, "status").text


def _hours_minutes(late: timedelta) -> str:
    """The log book's way of writing a lateness: ``3 d 4 h 05 min``, ``4 h 28 min``, ``12 min``."""
    days, seconds = late.days, late.seconds
    hours, minutes = seconds // 3600, seconds % 3600 // 60
    if days:
        return f"{days} d {hours} h {minutes:02d} min"
    return f"{hours} h {minutes:02d} min" if hours else f"{minutes} min"


def _log_in(d: object, wait: object, name: str, password: str) -> None:
    from selenium.webdriver.common.by import By

    wait.until(lambda d: d.find_elements(By.ID, "username"))  # type: ignore[attr-defined]
    d.find_element(By.ID, "username").send_keys(name)  # type: ignore[attr-defined]
    d.find_element(By.ID, "password").send_keys(password)  # type: ignore[attr-defined]
    d.find_element(By.ID, "login").click()  # type: ignore[attr-defined]
    wait.until(lambda d: d.find_elements(By.ID, "portfolio"))  # type: ignore[attr-defined]


PHONE, DESKTOP = 390, 1280


def _width(d: object, width: int) -> None:
    """The viewport of a phone (390 px, a touch device) or a desktop, as Chromium's device emulation makes it."""
    d.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",  # type: ignore[attr-defined]
                      {"width": width, "height": 844 if width == PHONE else 1000, "deviceScaleFactor": 1,
                       "mobile": width == PHONE})


def test_the_desk_at_phone_and_desktop_width(demo: dict[str, object], desk: str, browser: object) -> None:
    """At 390 px the portfolio has no sideways scroll and the header is at most two lines; the
    portfolio, the site page and the storm order's page are kept as screenshots at both widths."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.remote.webdriver import WebDriver
    from selenium.webdriver.support.ui import WebDriverWait

    d: WebDriver = browser  # type: ignore[assignment]
    shots = artifacts_dir("web-widths")
    print(f"\nscreenshots: {shots}")
    wait = WebDriverWait(d, 30)
    d.get(desk + "/")
    _log_in(d, wait, "inspector", str(demo["passwords"]["inspector"]))  # type: ignore[index]
    storm = d.find_element(By.XPATH, "//tr[@class='order'][td[contains(., 'storm inspection')]]"
                                     "//a[starts-with(@href, '/orders/')]")
    pages = {"portfolio": (desk + "/", "portfolio"), "site": (desk + "/sites/riverside-commons", "chart-rain"),
             "order": (desk + f"/orders/{storm.text}", "due")}
    for width in (PHONE, DESKTOP):
        _width(d, width)
        for name, (url, mark) in pages.items():
            d.get(url)
            wait.until(lambda d, mark=mark: d.find_elements(By.ID, mark))  # type: ignore[misc]
            assert d.execute_script("return window.innerWidth") == width
            if name == "portfolio" and width == PHONE:
                sideways = d.execute_script("return document.documentElement.scrollWidth - window.innerWidth")
                assert sideways <= 0, f"the portfolio scrolls {sideways} px sideways at {width} px"
                line = d.execute_script("return parseFloat(getComputedStyle(document.body).lineHeight)")
                header = d.find_element(By.CSS_SELECTOR, "header.top").size["height"]
                assert header <= 2 * line + 16, f"the header is {header} px high ({line} px a line)"
            d.save_screenshot(str(shots / f"{name}-{width}.png"))
    for name in pages:
        for width in (PHONE, DESKTOP):
            with Image.open(shots / f"{name}-{width}.png") as shot:
                assert shot.width == width


def test_during_demo_web_a_device_is_shown_silent_only_for_its_own_missed_polls(demo: dict[str, object]) -> None:
    """While `demo --web` runs (wall-paced at 1,500x: the desk's clock runs ahead of what the pipeline
    has stored yet), the portfolio and the site page show a device silent, UNKNOWN or hatched only
    where the store -- read after the run -- holds no reading on the device's own poll grid. The
    default scenario has no device outage: on an idle machine nothing is shown; a loaded one may
    skip poll slots (the gateway moves a late poll to the latest due slot), and those show."""
    work = demo["work"]
    assert isinstance(work, Path)
    live = demo["live"]
    assert isinstance(live, list)
    scenario = load_scenario("default")
    stored = _stored(work)
    problems = [p for s in live for p in _unexplained(s, stored, scenario.start)]
    assert not problems, "\n".join(problems[:20])
    shown = sum(bool(s.silent or s.unknown or s.gaps) for s in live)
    print(f"\n{len(live)} page loads during the run, {shown} showing a gap the store confirms: "
          + ", ".join(f"{s.page} at {s.data_time:%d %H:%M}" for s in live))
    during = [s for s in live if "running alert engine" in s.clock or "its alert engine is starting" in s.clock]
    assert len({s.data_time for s in during}) >= 3, [s.clock for s in live]


def test_a_kept_demo_state_shows_no_device_silent_at_the_runs_end(demo: dict[str, object], browser: object) -> None:
    """The desk over the demo's state at the time its engine reached (no --wall-time): that clock
    stopped minutes after the last reading, and the run's end is no silence -- no device is listed
    silent, turbidity and the basin are not UNKNOWN, the site page hatches nothing at the run's end;
    a device is shown silent only where it missed polls of its own grid (a loaded machine's gateway
    may skip slots)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.remote.webdriver import WebDriver
    from selenium.webdriver.support.ui import WebDriverWait

    work = demo["work"]
    port = free_port()
    log = open(Path(str(demo["root"])) / "web-reached.err", "wb")
    proc = _stormwatch("web", "--store", f"sqlite:///{work}/stormwatch.db", "--state-dir", str(work), "--port",
                       str(port), stdout=subprocess.DEVNULL, stderr=log)
    try:
        wait_until(lambda: _answers(f"http://127.0.0.1:{port}/login"), 60, "stormwatch web")
        d: WebDriver = browser  # type: ignore[assignment]
        wait = WebDriverWait(d, 30)
        d.get(f"http://127.0.0.1:{port}/")
        _log_in(d, wait, "smo", str(demo["passwords"]["smo"]))  # type: ignore[index]
        assert "simulated time the alert engine reached" in d.find_element(By.ID, "now").text
        seen = _look(d, f"http://127.0.0.1:{port}")
        stored = _stored(work)
        newest = max(t for rows in stored.readings.values() for t, _ in rows)
        assert [s.data_time for s in seen] == [newest, newest]  # judged at the run's last reading
        problems = [p for s in seen for p in _unexplained(s, stored, load_scenario("default").start)]
        assert not problems, "\n".join(problems)
    finally:
        proc.terminate()
        proc.wait(30)
        log.close()
