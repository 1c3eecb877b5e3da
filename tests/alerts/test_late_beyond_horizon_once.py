"""A reading older than the re-evaluation horizon is only logged (run `stormwatch evaluate`) -- once.

A turbidity reading stamped 14 h back reached a live alert service: the live path warned "late
reading ... older than the re-evaluation horizon", and then every store catch-up (every 5 s while
sequence holes were open, and at every reconnect) warned again that the engine "never received" it:
24 WARNING lines in two minutes for one reading. Judged once, it is remembered as seen.
"""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest

from stormwatch.alerts.engine import Engine
from stormwatch.profiles import ProfileLibrary
from tests.alerts_support import MIN, T0, Feeder, minute, site

LOGGER = "stormwatch.alerts.engine"


def _engine_past_an_hour(feed: Feeder) -> Engine:
    engine = Engine.for_site(site("ch133"), ProfileLibrary(), None, 300, reevaluate_late=True,
                             late_horizon_s=1800)
    for i in range(90):
        for r in minute(feed, i):
            engine.feed(r)
    return engine


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and r.name == LOGGER]


def test_a_reading_beyond_the_horizon_read_back_again_and_again_is_logged_once(
        caplog: pytest.LogCaptureFixture) -> None:
    feed = Feeder()
    engine = _engine_past_an_hour(feed)
    old = feed("up", "turbidity", 11.0, "NTU", T0 - timedelta(hours=14))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        for _ in range(3):  # three catch-ups from the store
            assert engine.catch_up([old]) == []
    assert len(_warnings(caplog)) == 1, _warnings(caplog)


def test_a_reading_beyond_the_horizon_received_live_is_not_said_never_received(
        caplog: pytest.LogCaptureFixture) -> None:
    feed = Feeder()
    engine = _engine_past_an_hour(feed)
    old = feed("up", "turbidity", 11.0, "NTU", T0 + 10 * MIN - timedelta(hours=14))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert engine.feed(old) == []
        assert engine.catch_up([old]) == []
        assert engine.feed(old) == []  # a redelivery
    warnings = _warnings(caplog)
    assert len(warnings) == 1 and "late reading" in warnings[0], warnings
