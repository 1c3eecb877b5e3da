"""``stormwatch users add|list|passwd``: accounts of the web desk, and clear errors for bad input."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from stormwatch.app.cli import app
from stormwatch.web.accounts import Accounts


def _run(*args: str, stdin: str = "") -> tuple[int, str]:
    r = CliRunner().invoke(app, list(args), input=stdin)
    return r.exit_code, r.output


def _record_sites(state_dir: Path, *sites: str) -> None:
    """A state directory whose SQLite store (``stormwatch.db``, as a demo keeps it) records ``sites``."""
    from datetime import UTC, datetime

    from stormwatch.stores.base import SiteInfo
    from stormwatch.stores.sqlite import SqliteStore

    store = SqliteStore(state_dir / "stormwatch.db")
    store.write_sites([SiteInfo(s, "America/New_York", "ch133") for s in sites], datetime(2026, 6, 1, tzinfo=UTC))
    store.close()


def _record_progress(state_dir: Path, site: str) -> None:
    """A state directory whose alert service (``alerts.db``) has watched ``site`` (its progress)."""
    from datetime import UTC, datetime

    from stormwatch.alerts.servicestate import ServiceState

    state = ServiceState(state_dir / "alerts.db")
    state.record_progress({site: datetime(2026, 6, 1, 12, tzinfo=UTC)})
    state.close()


def test_add_list_passwd(tmp_path: Path) -> None:
    state = str(tmp_path)
    _record_sites(tmp_path, "riverside-commons")
    code, out = _run("users", "add", "ina", "--role", "inspector", "--site", "riverside-commons", "--name",
                     "Ina Inspector", "--email", "ina@village.example", "--password-stdin", "--state-dir", state,
                     stdin="a long password\n")
    assert code == 0 and out.strip() == "added ina (inspector: riverside-commons)"
    code, out = _run("users", "add", "sam", "--role", "smo", "--state-dir", state,
                     stdin="smo password 1\nsmo password 1\n")  # prompted twice, hidden
    assert code == 0 and "added sam (smo, every site)" in out
    code, out = _run("users", "list", "--state-dir", state)
    assert code == 0
    assert [line.split()[:2] for line in out.splitlines()] == [["ina", "inspector"], ["sam", "smo"]]
    assert "ina@village.example" in out
    code, out = _run("users", "passwd", "ina", "--password-stdin", "--state-dir", state, stdin="new password 2\n")
    assert code == 0 and "sessions have ended" in out
    accounts = Accounts(tmp_path / "web.db")
    assert accounts.authenticate("ina", "a long password") is None
    user = accounts.authenticate("ina", "new password 2")
    assert user is not None and user.display_name == "Ina Inspector"
    accounts.close()
    assert "$argon2id$" in (tmp_path / "web.db").read_bytes().decode("latin-1")  # hashes, never the password
    assert b"new password 2" not in (tmp_path / "web.db").read_bytes()


def test_bad_input_is_one_clear_line(tmp_path: Path) -> None:
    state = str(tmp_path)
    cases = [
        (["users", "add", "x", "--role", "admin", "--site", "a"],
         "unknown role 'admin': one of inspector, smo, contractor"),
        (["users", "add", "x", "--role", "inspector"], "an account with role inspector needs at least one site"),
        (["users", "add", "x y", "--role", "smo"], "user name 'x y'"),
        (["users", "add", "bób", "--role", "smo"],  # ASCII is what the grammar means by a letter
         "error: user name 'bób': ASCII letters and digits and . _ @ - only (up to 64), starting with an ASCII "
         "letter or digit\n"),
        (["users", "add", "x", "--role", "smo"], "at least 8 characters"),
        (["users", "passwd", "nobody"], "no user named 'nobody'"),
    ]
    for args, message in cases:
        code, out = _run(*args, "--password-stdin", "--state-dir", state, stdin="short\n")
        assert code == 2, (args, out)
        assert message in out and "Traceback" not in out, (args, out)
    _run("users", "add", "x", "--role", "smo", "--password-stdin", "--state-dir", state, stdin="long enough\n")
    code, out = _run("users", "add", "x", "--role", "smo", "--password-stdin", "--state-dir", state,
                     stdin="long enough\n")
    assert code == 2 and "a user named 'x' already exists" in out
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "web.db").write_text("not a database, just text " * 50)
    code, out = _run("users", "list", "--state-dir", str(tmp_path / "bad"))
    assert code == 2 and "not a stormwatch web state file" in out


def test_a_site_id_is_checked_against_the_sites_of_the_state_dir(tmp_path: Path) -> None:
    """Without --sites, a --site-id must be a site the state directory records (a typo of a demo's
    riverside-commons is refused, naming the known sites); with nothing recorded there, the command
    refuses and asks for --sites -- never a site taken on trust."""
    empty = tmp_path / "empty"
    empty.mkdir()
    code, out = _run("users", "add", "bob", "--role", "inspector", "--site-id", "riverside-commons",
                     "--password-stdin", "--state-dir", str(empty), stdin="longenough123\n")
    assert code == 2
    assert out == (f"error: --site-id: no sites recorded in --state-dir {empty} to check riverside-commons against "
                   "(no work orders or store yet): pass --sites DIR, the site files the desk serves\n")
    assert not (empty / "alerts.db").exists() and not (empty / "stormwatch.db").exists()  # read, never made

    store_dir = tmp_path / "store"
    store_dir.mkdir()
    _record_sites(store_dir, "riverside-commons", "mill-creek")
    code, out = _run("users", "add", "bob", "--role", "inspector", "--site-id", "riversde-commons",
                     "--password-stdin", "--state-dir", str(store_dir), stdin="longenough123\n")
    assert code == 2
    assert out == (f"error: --site-id riversde-commons: no such site in --state-dir {store_dir} "
                   "(its sites: mill-creek, riverside-commons)\n")

    book_dir = tmp_path / "book"
    book_dir.mkdir()
    _record_progress(book_dir, "harbor-view")
    code, out = _run("users", "add", "bob", "--role", "inspector", "--site-id", "harbour-view",
                     "--password-stdin", "--state-dir", str(book_dir), stdin="longenough123\n")
    assert code == 2 and out == f"error: --site-id harbour-view: no such site in --state-dir {book_dir} " \
                                "(its sites: harbor-view)\n"
    code, out = _run("users", "add", "bob", "--role", "inspector", "--site-id", "harbor-view",
                     "--password-stdin", "--state-dir", str(book_dir), stdin="longenough123\n")
    assert code == 0 and out == "added bob (inspector: harbor-view)\n"


def test_web_refuses_bad_settings_with_one_line(tmp_path: Path) -> None:
    from tests.web_support import build

    world = build(tmp_path / "w")
    store, state = str(world["store"]), str(world["state"])
    bad_site = tmp_path / "bad.yaml"
    bad_site.write_text("site: {id: x}\n")
    cases = [
        (["web", "--store", f"sqlite:///{tmp_path}/missing.db", "--state-dir", state], "no SQLite store at"),
        (["web", "--store", store, "--state-dir", state, "--site", str(bad_site)], "bad.yaml: site.jurisdiction"),
        (["web", "--store", "influx9://h/db", "--state-dir", state], "unknown store URL scheme 'influx9'"),
        (["web", "--store", store, "--state-dir", state, "--smtp", "http://mail"], "use smtp://host"),
        (["web", "--store", store, "--state-dir", state, "--broker", "ftp://x"], "--broker"),
    ]
    for args, message in cases:
        code, out = _run(*args)
        assert code == 2, (args, out)
        assert message in out and "Traceback" not in out, (args, out)
