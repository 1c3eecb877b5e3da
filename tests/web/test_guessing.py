"""The desk resists guessing (docs/web.md, "Guessing passwords"): failed logins are throttled per
account and per client address, the right password during a lockout is refused with when to retry,
an SMO lifts a lockout (command line or desk), and every login gets a new session token -- the one
the browser held ends.

By hand, with the policy of docs/web.md: 4 failures are answered, the 5th locks the account for
60 s; after that window one more failure locks it for 120 s; 20 failures from one address lock the
address for 60 s whatever the names.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from starlette.testclient import TestClient
from typer.testing import CliRunner

from stormwatch.app.cli import app
from stormwatch.web.app import create_app
from stormwatch.web.server import DeskSettings, open_desk
from tests.web_support import PASSWORD, build, csrf_of, login


class Clock:
    """Wall-clock seconds the test moves by hand (the throttle's clock)."""

    def __init__(self) -> None:
        self.t = 1_780_000_000.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture()
def world(tmp_path: Path) -> dict[str, object]:
    return build(tmp_path)


def desk_client(world: dict[str, object], address: str = "203.0.113.7", clock: Clock | None = None,
                ) -> TestClient:
    desk = open_desk(DeskSettings(sites=world["sites"], store_url=str(world["store"]),  # type: ignore[arg-type]
                                  state_dir=world["state"]))  # type: ignore[arg-type]
    if clock is not None:
        desk.accounts.throttle.now = clock
    return TestClient(create_app(desk), follow_redirects=False, client=(address, 40000))


def attempt(c: TestClient, user: str, password: str) -> tuple[int, str, str | None]:
    """One login POST: its status, the message shown and ``Retry-After``."""
    token = csrf_of(c.get("/login").text)
    r = c.post("/login", data={"username": user, "password": password, "csrf_token": token, "next": "/"})
    message = r.text.split('id="message">', 1)[1].split("</p>", 1)[0] if 'id="message">' in r.text else ""
    return r.status_code, message, r.headers.get("retry-after")


def test_forty_wrong_passwords_lock_the_account_and_the_right_one_waits(
        world: dict[str, object], caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    c = desk_client(world, clock=clock)
    caplog.set_level(logging.INFO)
    answers = [attempt(c, "ina", f"guess-{i}") for i in range(40)]
    assert [a[0] for a in answers[:4]] == [401] * 4
    assert answers[4] == (429, "Unknown user name or wrong password. Too many failed logins for this account: try "
                               "again after 2026-05-28 20:27:40 UTC (in 1 min 0 s), or ask the SMO to unlock it.", "60")
    assert {a[0] for a in answers[5:]} == {429}  # not even checked while locked
    status, message, retry = attempt(c, "ina", PASSWORD)  # the right password, during the lockout
    assert (status, retry) == (429, "60")
    assert message == ("Too many failed logins for this account: try again after 2026-05-28 20:27:40 UTC (in 1 min "
                       "0 s), or ask the SMO to unlock it.")
    logged = [r.getMessage() for r in caplog.records if r.name == "stormwatch.web.throttle"]
    assert logged == ["login throttled: account 'ina' locked for 60 s after 5 failed logins (the last for 'ina' from "
                      "203.0.113.7)"]

    clock.t += 61  # the window has passed: one more failure locks for twice as long
    assert attempt(c, "ina", "guess-41")[0::2] == (429, "120")
    clock.t += 121
    assert attempt(c, "ina", PASSWORD)[0] == 303  # and a login that succeeds forgets the account's count
    assert [attempt(c, "ina", f"again-{i}")[0] for i in range(4)] == [401] * 4


def test_an_smo_unlocks_an_account_on_the_command_line(world: dict[str, object]) -> None:
    c = desk_client(world)
    for i in range(5):
        attempt(c, "ina", f"guess-{i}")
    assert attempt(c, "ina", PASSWORD)[0] == 429
    state = str(world["state"])
    listed = CliRunner().invoke(app, ["users", "list", "--state-dir", state])
    assert listed.exit_code == 0, listed.output
    assert "for account ina (5 failed logins): `stormwatch users unlock ina`" in listed.output
    done = CliRunner().invoke(app, ["users", "unlock", "ina", "--state-dir", state])
    assert done.exit_code == 0 and done.stdout == "account ina: unlocked\n", done.output
    assert attempt(c, "ina", PASSWORD)[0] == 303


def test_one_address_guessing_many_accounts_is_locked_and_the_smo_lifts_it_on_the_desk(
        world: dict[str, object]) -> None:
    sprayer = desk_client(world, "198.51.100.9")
    answers = [attempt(sprayer, f"user{i}", "Winter2026!") for i in range(20)]
    assert [a[0] for a in answers[:19]] == [401] * 19
    assert answers[19][0] == 429 and "logins from your network address" in answers[19][1]
    assert attempt(sprayer, "sam", PASSWORD)[0] == 429  # a real account, from that address: refused too

    smo = desk_client(world, "192.0.2.4")  # the SMO's office
    login(smo, "sam")
    page = smo.get("/lockouts")
    assert page.status_code == 200 and "198.51.100.9" in page.text
    r = smo.post("/lockouts/unlock", data={"kind": "address", "name": "198.51.100.9", "csrf_token": csrf_of(page.text)})
    assert r.status_code == 303
    assert "198.51.100.9" not in smo.get("/lockouts").text
    assert attempt(sprayer, "sam", PASSWORD)[0] == 303

    inspector = desk_client(world, "192.0.2.5")
    login(inspector, "ina")
    assert inspector.get("/lockouts").status_code == 403


def test_a_login_gives_a_new_session_and_ends_the_one_the_browser_held(world: dict[str, object]) -> None:
    """OWASP ASVS 5.0 V7.2.4: a new session token at authentication, the current one terminated --
    also a token planted in the browser by someone else (session fixation)."""
    c = desk_client(world)
    login(c, "carl")
    planted = c.cookies.get("stormwatch_session")
    assert planted and c.get("/").status_code == 200
    login(c, "ina")  # the same browser, its cookie still sent
    fresh = c.cookies.get("stormwatch_session")
    assert fresh and fresh != planted
    other = desk_client(world, "192.0.2.9")
    other.cookies.set("stormwatch_session", planted)
    assert other.get("/").status_code == 303  # the old token is no session any more
