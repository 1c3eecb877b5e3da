"""Logic of session takeovers (``stormwatch/runtime/mqtttakeover.py``) and of the alert service's gateway
presence lines (``alerts/presence.py``), on a manual clock (real MQTT runs are in runtime/test_mqtt_session.py).

Expected values are worked by hand from the rules in the module docstrings.
"""

from __future__ import annotations

import logging
from itertools import pairwise

import pytest

from stormwatch.alerts.presence import GatewayPresence
from stormwatch.runtime.mqtttakeover import TakeoverGuard


class Tick:
    """A manual monotonic clock."""

    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_mqtt311_takeover_is_reported_at_the_third_short_session_and_backs_off_doubling_to_the_cap() -> None:
    g = TakeoverGuard(short_s=10, suspect_after=3, min_delay_s=1, max_delay_s=8)
    t = 0.0
    verdicts = []
    for held in (0.3, 1.0, 2.0, 4.0, 8.0, 8.0):  # each session lasts what the other side waited
        g.connected(t)
        t += held
        verdicts.append(g.lost(t, taken_over=False, broker_closed=True))
    assert [v.takeover for v in verdicts] == [True] * 6
    assert [v.streak for v in verdicts] == [1, 2, 3, 4, 5, 6]
    assert [v.reconnect_delay_s for v in verdicts] == [1, 2, 4, 8, 8, 8]  # 1 * 2**(streak-1), capped at 8
    assert [v.report for v in verdicts] == [False, False, True, False, False, False]  # ONE report
    assert [v.quiet for v in verdicts] == [False, False, False, True, True, True]
    assert g.takeovers == 6 and g.in_episode


def test_mqtt5_reason_0x8e_is_certain_at_once() -> None:
    g = TakeoverGuard(min_delay_s=1, max_delay_s=120)
    g.connected(0.0)
    v = g.lost(30.0, taken_over=True, broker_closed=False)  # even after a long session: the broker said so
    assert (v.takeover, v.report, v.streak, v.reconnect_delay_s) == (True, True, 1, 1)


@pytest.mark.parametrize(("held", "broker_closed"), [
    (30.0, True),    # a session that lasted: the broker restarted, a link dropped
    (0.5, False),    # short, but our keep-alive found it dead (not closed by the broker)
])
def test_ordinary_losses_are_not_takeovers_and_end_a_streak(held: float, broker_closed: bool) -> None:
    g = TakeoverGuard(short_s=10, min_delay_s=2, max_delay_s=60)
    g.connected(0.0)
    assert g.lost(0.5, taken_over=False, broker_closed=True).streak == 1
    g.connected(10.0)
    v = g.lost(10.0 + held, taken_over=False, broker_closed=broker_closed)
    assert (v.takeover, v.report, v.streak, v.reconnect_delay_s) == (False, False, 0, 2)
    assert g.takeovers == 1


def test_a_loss_before_any_accepted_connection_is_not_a_takeover() -> None:
    g = TakeoverGuard()
    assert not g.lost(5.0, taken_over=False, broker_closed=True).takeover


def test_an_episode_ends_when_a_connection_holds_for_quiet_s_then_a_new_one_is_reported_again() -> None:
    g = TakeoverGuard(short_s=10, suspect_after=1, quiet_s=600, min_delay_s=1, max_delay_s=120)
    g.connected(0.0)
    assert g.lost(1.0, taken_over=False, broker_closed=True).report
    g.connected(2.0)
    # held 300 s < 600 s: still the episode -- the other side's reconnect after its back-off took it
    v = g.lost(302.0, taken_over=False, broker_closed=True)
    assert v.takeover and v.quiet and g.in_episode and v.reconnect_delay_s == 120  # settled: the cap
    g.connected(303.0)
    v = g.lost(903.0, taken_over=False, broker_closed=True)  # held 600 s: over
    assert not v.quiet and not g.in_episode
    g.connected(904.0)
    assert g.lost(904.5, taken_over=False, broker_closed=True).report


def _fight(minutes: float, **bounds: float) -> tuple[list[float], list[int]]:
    """Two processes with one client id on one broker, on simulated time: each connect takes the session
    from the other (MQTT 5: the broker says so); each waits its guard's delay before connecting again.
    Returns the takeover times and the reports, A's and B's."""
    guards = {"A": TakeoverGuard(**bounds), "B": TakeoverGuard(**bounds)}  # type: ignore[arg-type]
    t, holder, waiting = 0.0, "A", "B"
    guards["A"].connected(t)
    takeovers: list[float] = []
    reports = [0, 0]
    t = 30.0  # B starts half a minute after A
    while t < minutes * 60:
        guards[waiting].connected(t)
        verdict = guards[holder].lost(t, taken_over=True, broker_closed=False)
        takeovers.append(t)
        reports["AB".index(holder)] += verdict.report
        holder, waiting = waiting, holder
        t += verdict.reconnect_delay_s
    return takeovers, reports


def test_two_processes_with_one_client_id_settle_to_one_takeover_in_five_minutes_after_the_first() -> None:
    """The default rule (docs/runtime.md): each process's delay doubles from 1 s while its episode is
    younger than a minute, then is 300 s. Worked by hand: A loses at 30, 32, 36, 44, 60 s (delays 1, 2,
    4, 8, 16) and at 92 s (62 s into its episode: 300); B at 31, 34, 40, 52, 76 s (1, 2, 4, 8, 16) and
    at 392 s (300). Takeovers: 30, 31, 32, 34, 36, 40, 44, 52, 60, 76, 92, then every 300 s."""
    takeovers, reports = _fight(30)
    assert takeovers[:13] == [30, 31, 32, 34, 36, 40, 44, 52, 60, 76, 92, 392, 692]
    later = [t for t in takeovers if t > takeovers[0] + 60]  # after the first minute of the episode
    assert all(b - a >= 300 for a, b in pairwise(later))  # at most one in five minutes
    assert len(takeovers) == 11 + (30 * 60 - 92) // 300
    assert reports == [1, 1]  # one ERROR per process for the whole episode


def test_a_configurable_settle_keeps_the_same_shape() -> None:
    """The same rule scaled down (settle 4 s, settled delay 8 s): A's delays 1, 2, then 8 from 36 s
    (6 s into its episode); B's 1, 2, then 8 from 44 s."""
    takeovers, _ = _fight(2, min_delay_s=1, max_delay_s=8, settle_s=4)
    assert takeovers[:7] == [30, 31, 32, 34, 36, 44, 52]
    assert all(b - a == 8 for a, b in pairwise(takeovers[4:]))


def test_guard_refuses_nonsense_bounds() -> None:
    with pytest.raises(ValueError):
        TakeoverGuard(suspect_after=0)
    with pytest.raises(ValueError):
        TakeoverGuard(min_delay_s=10, max_delay_s=5)


# -- the alert service's gateway presence lines --------------------------------------------------


def test_a_restart_is_info_and_never_taken_for_two_gateways() -> None:
    tick = Tick()
    p = GatewayPresence(window_s=300, flap_after=4, monotonic=tick)
    assert p.observe("s1", "gw", "online", "A", retained=False)[0] == logging.INFO
    tick.t += 5
    assert p.observe("s1", "gw", "offline", None, retained=False) == (logging.INFO, "s1: gateway gw is offline")
    tick.t += 5
    assert p.observe("s1", "gw", "online", "B", retained=False) == (
        logging.INFO, "s1: gateway gw is online (restarted: boot B, was A)")
    tick.t += 5
    assert p.observe("s1", "gw", "online", "B", retained=False)[0] == logging.DEBUG  # same process reconnecting


def test_two_boots_alternating_are_one_error_then_debug() -> None:
    tick = Tick()
    p = GatewayPresence(window_s=300, flap_after=4, monotonic=tick)
    levels = []
    # B's status is repeated once (paho resends an unacknowledged status on reconnect): A, B, B, A...
    for i, boot in enumerate(["A", "B", "B", "A", "B", "A", "B"]):
        tick.t = 1000.0 + 2.0 * i
        levels.append(p.observe("s1", "gw", "online", boot, retained=False))
    expected = [logging.INFO, logging.INFO, logging.DEBUG, logging.ERROR] + [logging.DEBUG] * 3
    assert [lvl for lvl, _ in levels] == expected
    assert levels[0][1] == "s1: gateway gw is online"
    assert levels[1][1] == "s1: gateway gw is online (restarted: boot B, was A)"
    error = levels[3][1]
    assert error.startswith("s1: gateway gw: two gateways publish under one gateway id (boots B and A alternate, "
                            "4 connects in 300 s)")


def test_one_gateway_reconnecting_often_is_one_warning_and_quiet_again_after_a_calm_window() -> None:
    tick = Tick()
    p = GatewayPresence(window_s=300, flap_after=4, monotonic=tick)
    got = []
    for i in range(6):  # one boot, connecting every 10 s
        tick.t = 1000.0 + 10.0 * i
        got.append(p.observe("s1", "gw", "online", "A", retained=False))
    assert [lvl for lvl, _ in got] == [logging.INFO] + [logging.DEBUG] * 2 + [logging.WARNING] + [logging.DEBUG] * 2
    assert got[1][1] == "s1: gateway gw is online again (boot A)"
    assert got[3][1].startswith("s1: gateway gw connected 4 times in 300 s (flapping connection)")
    tick.t += 301.0  # a calm window later, reporting is back to normal: the gateway going away is news
    assert p.observe("s1", "gw", "offline", None, retained=False) == (logging.INFO, "s1: gateway gw is offline")


def test_retained_status_is_info_when_new_and_debug_when_redelivered() -> None:
    p = GatewayPresence(monotonic=Tick())
    first = p.observe("s1", "gw", "online", "A", retained=True)
    again = p.observe("s1", "gw", "online", "A", retained=True)  # the alert service reconnected
    assert first == (logging.INFO, "s1: gateway gw status online (retained: last known state, not proof it is "
                                   "alive; a silent rain gauge still opens a data gap)")
    assert again[0] == logging.DEBUG
    assert p.observe("s1", "gw", "offline", None, retained=False) == (logging.INFO, "s1: gateway gw is offline")
