"""A gateway status message the alert service cannot read (not JSON, not an object, a state that is
neither "online" nor "offline") is bad input: it is logged with its reason and changes nothing -- in
particular it never cancels a last will, which would keep a dead gateway's rain gauge from opening
its data gap (docs/reference/failure-kinds.md #11, "Dead device looks alive"; docs/alerts.md).

No broker: the service is built and its status handling called directly.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from stormwatch.alerts.service import AlertService
from stormwatch.clock import ManualClock
from stormwatch.profiles import ProfileLibrary
from tests.alerts_support import T0, site

WILL = json.dumps({"state": "offline", "boot": "b1"}).encode()


def _service(tmp_path: Path) -> AlertService:
    return AlertService([site("ch133")], ProfileLibrary(), "mqtt://127.0.0.1:1", None, tmp_path / "state.db",
                        ManualClock(T0), client_id="status-test")


@pytest.mark.parametrize("payload", [b"{garbage", b"null", b"[1, 2]", b'"offline"', b'{"state": 5}',
                                     b'{"online": "maybe"}', b'{"state": "sleeping"}', b"\xbe\xef\x00"])
def test_an_unreadable_status_keeps_the_last_will_and_says_why(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, payload: bytes) -> None:
    svc = _service(tmp_path)
    svc._status("s1", "gw", WILL, False)
    assert ("s1", "gw") in svc._wills
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="stormwatch.alerts.service"):
        svc._status("s1", "gw", payload, False)
    assert ("s1", "gw") in svc._wills  # still gone: a will is cancelled only by a status that says so
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "s1: gateway gw: unreadable status message ignored" in warnings[0], warnings
    assert not any(" is ?" in r.getMessage() for r in caplog.records)


def test_a_readable_online_status_still_cancels_the_will(tmp_path: Path) -> None:
    svc = _service(tmp_path)
    svc._status("s1", "gw", WILL, False)
    svc._status("s1", "gw", json.dumps({"state": "online", "boot": "b2"}).encode(), False)
    assert ("s1", "gw") not in svc._wills


def test_a_cleared_retained_status_changes_nothing_quietly(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    svc = _service(tmp_path)
    svc._status("s1", "gw", WILL, False)
    with caplog.at_level(logging.INFO, logger="stormwatch.alerts.service"):
        svc._status("s1", "gw", b"", False)
    assert ("s1", "gw") in svc._wills
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_repeated_unreadable_statuses_warn_once_until_a_readable_one(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    svc = _service(tmp_path)
    with caplog.at_level(logging.INFO, logger="stormwatch.alerts.service"):
        for payload in (b"{bad", b"{bad", WILL, b"{bad"):
            svc._status("s1", "gw", payload, False)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2  # the first bad one, and the first after the readable will
