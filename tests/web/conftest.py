"""Fixtures of the web desk's tests.

Passwords: the desk hashes them with argon2-cffi's defaults (RFC 9106's second recommendation:
Argon2id, 64 MiB, 3 passes; web/accounts.py), about a second a hash on a loaded 2-core machine, and a
test adds accounts and logs in several times. Here they are hashed with argon2's ``CHEAPEST`` profile
(its documentation: for testing only): the same code paths and the same verdicts for a thousandth of
the work. tests/web/test_passwords.py holds the desk itself to the RFC parameters.
"""

from __future__ import annotations

import pytest
from argon2 import PasswordHasher, profiles

from stormwatch.web import accounts


@pytest.fixture(autouse=True)
def cheap_password_hashes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Accounts made in this test hash with argon2's cheapest parameters."""
    monkeypatch.setattr(accounts, "PasswordHasher", lambda: PasswordHasher.from_parameters(profiles.CHEAPEST))
