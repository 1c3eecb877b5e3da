"""The desk stores passwords as Argon2id hashes at RFC 9106's second recommended parameters
(64 MiB, 3 passes, 4 lanes; RFC 9106 section 4), never the cheap ones the other web tests use."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from stormwatch.web.accounts import Accounts


def test_a_password_is_stored_as_argon2id_at_the_rfc_parameters(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.undo()  # the desk's own hasher, not tests/web/conftest.py's cheap one
    book = Accounts(tmp_path / "web.db")
    try:
        book.add("sam", "smo", "correct horse battery")
        assert book.authenticate("sam", "correct horse battery") is not None
        assert book.authenticate("sam", "wrong horse battery") is None
    finally:
        book.close()
    with sqlite3.connect(tmp_path / "web.db") as db:
        (digest,) = db.execute("SELECT password_hash FROM users WHERE name = 'sam'").fetchone()
    assert digest.startswith("$argon2id$v=19$m=65536,t=3,p=4$")
