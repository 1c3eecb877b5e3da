"""The enforcement desk end to end on a demo state: `stormwatch demo` runs its storm (the turbidity
plume opens a review order), `stormwatch web` serves the state, and in headless Chromium the SMO opens
a case from the turbidity order -- a draft with the order's evidence -- completes it, issues and serves
the notice. The site's contractor then sees the case and its appeal deadline on the portfolio and the
case page; another site's contractor gets 403. The letter's PDF text holds every required content of
Ch. 133 §133-10A in order and the last day of appeal; `stormwatch enforce register` has the row.

Dates by hand: the demo's simulated time ends Tue 2026-06-02 (EDT), the notice is issued and served that
day, so the appeal window closes Tue 2026-06-09 (§133-10A(6): seven days of service; §133-11: seven
calendar days of issuance). Skipped without Chromium, except under CI=true.
"""

from __future__ import annotations

import csv
import http.cookiejar
import io
import os
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from stormwatch.alerts.workorders import WorkOrders
from stormwatch.clock import WallClock
from stormwatch.web.accounts import Accounts
from stormwatch.web.server import free_port
from tests.conftest import artifacts_dir
from tests.enforcement.support import in_order
from tests.shared_runs import DemoRun
from tests.waits import wait_until

pytestmark = pytest.mark.slow  # a demo run, a web server and a browser

CHROMIUM, DRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
PASSWORD = "correct horse battery"
SITE = "riverside-commons"


def _need_browser() -> None:
    if CHROMIUM.exists() and DRIVER.exists():
        return
    msg = "Chromium not installed (Debian: apt-get install chromium chromium-driver)"
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true but {msg}")
    pytest.skip(msg)


def _cli(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "stormwatch", *args], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.fixture(scope="module")
def state(tmp_path_factory: pytest.TempPathFactory, default_demo: DemoRun) -> Iterator[dict[str, object]]:
    """A finished demo run's state (a copy of the session's), three accounts, and `stormwatch web` serving it."""
    _need_browser()
    root = tmp_path_factory.mktemp("enforcement-demo")
    work = default_demo.copy_state(root / "demo")
    accounts = Accounts(work / "web.db")
    accounts.add("sam", "smo", PASSWORD, display_name="Sam SMO")
    accounts.add("carl", "contractor", PASSWORD, sites=[SITE], display_name="Carl Contractor")
    accounts.add("otto", "contractor", PASSWORD, sites=["hilltop"], display_name="Otto Other")
    accounts.close()
    book = WorkOrders(work / "alerts.db", WallClock())
    (order,) = [o for o in book.list(site=SITE) if o.kind == "turbidity_review"]
    book.close()
    port = free_port()
    log = open(root / "web.err", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "stormwatch", "web", "--store", f"sqlite:///{work}/stormwatch.db",
                             "--state-dir", str(work), "--port", str(port)], stdout=subprocess.DEVNULL, stderr=log,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: urllib.request.urlopen(f"{url}/login", timeout=2).status == 200, 60, "stormwatch web",
                   ignore=(OSError,))
        yield {"work": work, "url": url, "order": order}
    finally:
        proc.terminate()
        proc.wait(30)
        log.close()


class _Session:
    """A logged-in HTTP session (the desk's login form, its CSRF cookie and token), for status codes
    and downloads a browser does not show."""

    def __init__(self, url: str, user: str) -> None:
        self.url = url
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
        page = self.opener.open(f"{url}/login").read().decode()
        token = re.search(r'name="csrf_token" value="([^"]+)"', page)
        assert token
        form = urllib.parse.urlencode({"username": user, "password": PASSWORD, "csrf_token": token.group(1),
                                       "next": "/"}).encode()
        assert self.opener.open(f"{url}/login", form).status == 200  # redirected to the portfolio

    def get(self, path: str) -> tuple[int, bytes]:
        try:
            with self.opener.open(f"{self.url}{path}") as r:
                return r.status, r.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()


@pytest.fixture()
def browser(tmp_path: Path) -> Iterator[object]:
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = str(CHROMIUM)
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--window-size=1300,1600"):
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path / 'chromium-profile'}")
    driver = webdriver.Chrome(options=options, service=Service(str(DRIVER)))
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


@pytest.mark.timeout(600, func_only=True)  # setup: the session's demo run, its own 900 s
def test_the_smo_serves_a_notice_from_the_turbidity_event_and_the_site_sees_it(
        state: dict[str, object], browser: object) -> None:
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.remote.webdriver import WebDriver
    from selenium.webdriver.support.ui import Select, WebDriverWait

    d: WebDriver = browser  # type: ignore[assignment]
    url, order = str(state["url"]), state["order"]
    shots = artifacts_dir("enforcement-desk")
    print(f"\nscreenshots: {shots}")
    wait = WebDriverWait(d, 60, ignored_exceptions=(StaleElementReferenceException, NoSuchElementException))

    def log_in(user: str) -> None:
        d.get(f"{url}/login")
        wait.until(lambda d: d.find_elements(By.ID, "username"))
        d.find_element(By.ID, "username").send_keys(user)
        d.find_element(By.ID, "password").send_keys(PASSWORD)
        d.find_element(By.ID, "login").click()
        wait.until(lambda d: d.find_elements(By.ID, "portfolio"))

    def record(action: str, **fields: str) -> None:
        Select(d.find_element(By.ID, "record-action")).select_by_value(action)
        for name, value in fields.items():
            element = d.find_element(By.ID, f"record-{name}")
            if element.tag_name == "select":
                Select(element).select_by_value(value)
            else:
                d.execute_script("arguments[0].value = arguments[1]", element, value)
        d.find_element(By.ID, "record").click()
        wait.until(lambda d: "done=recorded" in d.current_url or d.find_elements(By.ID, "error"))
        assert not d.find_elements(By.ID, "error"), d.find_element(By.ID, "error").text

    # the SMO opens a case from the turbidity order: a draft with its evidence
    log_in("sam")
    d.get(f"{url}/orders/{order.id}")  # type: ignore[attr-defined]
    wait.until(lambda d: d.find_elements(By.ID, "open-case"))
    d.find_element(By.ID, "open-case").click()
    wait.until(lambda d: "done=opened" in d.current_url)
    case = d.current_url.split("/enforcement/")[1].split("?")[0]
    assert case == "EC-2026-001"
    assert "draft" in d.find_element(By.ID, "stage").text
    assert "Not ready to issue" in d.find_element(By.ID, "gaps").text
    evidence = d.find_element(By.CSS_SELECTOR, "table.evidence").text
    assert "5-minute medians" in evidence and "downstream" in evidence and "EDT" in evidence
    assert "turbidity violation" in d.find_element(By.ID, "nature").text
    d.save_screenshot(str(shots / "1-draft.png"))
    for field, value in (("party", "Riverside Builders LLC"), ("address", "12 Mill Road, Springfield, NY 11000"),
                         ("remedy", "Repair the silt fence and the sediment trap; stabilise the slope.")):
        element = d.find_element(By.ID, f"edit-{field}")
        element.clear()
        element.send_keys(value)
    d.execute_script("arguments[0].value = arguments[1]", d.find_element(By.ID, "edit-correct-by"), "2026-06-05")
    d.find_element(By.ID, "save-draft").click()
    wait.until(lambda d: "done=edited" in d.current_url)
    assert not d.find_elements(By.ID, "gaps")
    record("nov-issued", on="2026-06-02")
    record("nov-served", on="2026-06-02", method="hand")
    row = d.find_element(By.CSS_SELECTOR, 'tr[data-deadline="appeal"]').text
    assert "Tue 2026-06-09" in row and "Ch. 133 §133-10A(6); Ch. 133 §133-11" in row
    d.save_screenshot(str(shots / "2-served.png"))
    d.find_element(By.CSS_SELECTOR, "form[action='/logout'] button").click()

    # the site's contractor sees it on the portfolio and the case page
    log_in("carl")
    banner = d.find_element(By.CSS_SELECTOR, f'#enforcement .case-banner[data-case="{case}"]').text
    assert "appeal window closes Tue 2026-06-09" in banner
    d.save_screenshot(str(shots / "3-contractor-portfolio.png"))
    d.find_element(By.LINK_TEXT, case).click()
    wait.until(lambda d: d.find_elements(By.ID, "deadlines"))
    assert "Tue 2026-06-09" in d.find_element(By.CSS_SELECTOR, 'tr[data-deadline="appeal"]').text
    assert not d.find_elements(By.ID, "record-form")
    d.save_screenshot(str(shots / "4-contractor-case.png"))

    # another site's contractor: 403; the letter as the site's contractor downloads it
    assert _Session(url, "otto").get(f"/enforcement/{case}")[0] == 403
    status, pdf = _Session(url, "carl").get(f"/enforcement/{case}/letter.pdf?kind=nov")
    assert status == 200 and pdf.startswith(b"%PDF")
    (shots / "notice.pdf").write_bytes(pdf)
    text = " ".join(subprocess.run(["pdftotext", "-raw", str(shots / "notice.pdf"), "-"], check=True,
                                   capture_output=True, text=True).stdout.split())
    in_order(text, ["NOTICE OF VIOLATION", "Riverside Builders LLC",
                     "(1) Person responsible -- Ch. 133 §133-10A(1)", "12 Mill Road",
                     "(2) Location of the violation -- Ch. 133 §133-10A(2)", "riverside-commons",
                     "(3) Nature of the violation -- Ch. 133 §133-10A(3)", "turbidity violation",
                     "5-minute medians", "Turbidity at",
                     "(4) Remedial measures and time schedule -- Ch. 133 §133-10A(4)", "Repair the silt fence",
                     "Friday, June 5, 2026",
                     "(5) Penalty -- Ch. 133 §133-10A(5)", "up to $2,000",
                     "(6) Appeal -- Ch. 133 §133-10A(6)", "The last day to file your appeal is Tuesday, June 9, 2026",
                     "(7) Abatement and restoration -- Ch. 133 §133-10A(7)", "Sam SMO",
                     "Served on Tuesday, June 2, 2026 by hand"])

    # the register has the row
    rows = list(csv.DictReader(io.StringIO(_cli("enforce", "register", "--state-dir", str(state["work"])))))
    assert [(r["case"], r["enforcement_type"], r["enforcement_date"], r["responsible_party"], r["violation_date"])
            for r in rows] == [(case, "notice of violation", "2026-06-02", "Riverside Builders LLC", "2026-06-01")]
    assert rows[0]["served"] == "2026-06-02 hand" and rows[0]["regulatory_reference"] == "Ch. 133 §133-6C"
