"""The order and grouping of the tests for pytest-xdist's workers (``--dist loadgroup``), so they finish together.

The workers take tests in collection order, one at a time: the modules that take longest on the 2-core
CI machine (:data:`LONGEST_FIRST`) go first, so no worker is left with a four-minute test alone at the
end. A test that uses a module- or class-scoped fixture stays with its module's other such tests on one
worker (an ``xdist_group`` named after the module), so the fixture is made once; every other test goes
to whichever worker is free. ``-n auto`` is one worker a core, one more in the slow lane on an otherwise
idle machine (:func:`workers`). The order decides the time only, never a result. docs/architecture.md ("Tests").
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

#: Test modules by their time on the 2-core CI machine (its ``--durations``), longest first: a minute
#: or more each. A module missing here or in the wrong place costs time, never a result.
LONGEST_FIRST = (
    "tests/e2e/test_broker_cluster.py",
    "tests/e2e/test_services_lockstep.py",  # one worker's: its tests share a module's runs
    "tests/web/test_browser.py",  # likewise, the demo --web its tests look at
    "tests/e2e/test_delivery_acceptance.py",
    "tests/e2e/test_lockstep_acceptance.py",
    "tests/e2e/test_services_apart.py",
    "tests/runtime/test_mqtt_session.py",
    "tests/e2e/test_pipeline.py",
    "tests/gateway/test_takeover.py",
    "tests/app/test_demo_rerun.py",
    "tests/e2e/test_enforcement_desk.py",
    "tests/alerts/test_recovery.py",
    "tests/gateway/test_packet_limit.py",
    "tests/report/test_demo.py",
    "tests/alerts/test_partitioned.py",
    "tests/e2e/test_engine_acceptance.py",
    "tests/e2e/test_demo_small_storm.py",
    # under load (the CI machine shared) these take a minute or more too; collected late, they
    # would otherwise be the last tests of one worker while the others have finished
    "tests/stores/test_collisions.py",
    "tests/report/test_tharandt.py",
    "tests/deploy/test_packaging.py",
    "tests/importers/test_files.py",
)
_RANK = {module: rank for rank, module in enumerate(LONGEST_FIRST)}
_SHARED_SCOPES = frozenset({"class", "module", "package"})


def _module(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0]


def _shares_a_fixture(item: pytest.Item) -> bool:
    """Whether ``item`` uses a fixture made once for its class, module or package."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    return any(defs and defs[-1].scope in _SHARED_SCOPES for defs in info.name2fixturedefs.values())


def _group(item: pytest.Item, name: str) -> None:
    """Put ``item`` in the xdist group ``name``. pytest-xdist's worker marks the group in the test's id
    (``ID@NAME``, what its scheduler reads) by setting ``item._nodeid``, which pytest 9 no longer reads
    (the id is ``item._id``): unmarked, every test of a group went to any worker, and each worker made
    the module's fixture again (the browser tests' ``demo --web`` run twice). So the id is set here."""
    item.add_marker(pytest.mark.xdist_group(name))
    ident = getattr(item, "_id", None)
    if ident is not None and getattr(item.config.option, "loadgroup", False):  # a worker of --dist loadgroup
        item._id = type(ident).parse(f"{item.nodeid}@{name}")


def schedule(items: list[pytest.Item]) -> None:
    """Group the tests that share a module's fixture, then put the longest modules first (in place)."""
    for item in items:
        if _shares_a_fixture(item):
            _group(item, _module(item))
    items.sort(key=lambda item: _RANK.get(_module(item), len(_RANK)))  # stable: otherwise as collected


def cpu_times(stat: Path = Path("/proc/stat")) -> tuple[int, int]:
    """(busy, total) clock ticks of every CPU since boot: busy is user and system time -- niced work
    (CI's gates run at nice 19) is left out, as it yields to the tests."""
    user, nice, system, *rest = (int(x) for x in stat.read_text(encoding="ascii").split("\n", 1)[0].split()[1:])
    return user + system, user + nice + system + sum(rest)


def busy_cores(sample_s: float = 0.5) -> float:
    """Cores kept busy by normal-priority work over ``sample_s`` (0.0 where there is no /proc/stat)."""
    try:
        busy0, total0 = cpu_times()
        time.sleep(sample_s)
        busy1, total1 = cpu_times()
    except (OSError, ValueError):
        return 0.0
    # /proc/stat's first line sums every online CPU, not only the ones this process may use
    return (os.cpu_count() or 1) * (busy1 - busy0) / max(1, total1 - total0)


def workers(config: pytest.Config) -> int:
    """Workers of ``-n auto``: one a core, and one more for the slow lane alone (``-m slow``) when no
    other work holds a core. Slow tests mostly wait (CPU-s of a test against its seconds on the 2-core
    CI machine: services_apart 19 of 132, the broker cluster 98 of 230; the lane's load average about
    1), so a third worker fills the waits (clean clone: 705 s against 815-865 s at two); beside other
    work it would starve the paced ones, as two a core did (at four on two cores the cluster test's
    stored acknowledgements missed the fleet's 180 s wait). The CPU-hog test keeps its hog and its run
    on one core, so whatever lands beside it keeps the others (unpinned, at three workers, the lockstep
    runs beside it took 222-264 s instead of 37-50). Logic tests use their core whole: one a core."""
    cores = len(os.sched_getaffinity(0))
    if str(config.option.markexpr).strip() != "slow":
        return cores
    return cores + 1 if busy_cores() < 0.5 else cores
