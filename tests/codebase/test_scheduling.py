"""The workers' schedule (tests/scheduling.py) names real test modules -- a renamed or moved module
would silently lose its place at the front of the slow lane -- and keeps a module's shared fixture
on one worker."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.scheduling import LONGEST_FIRST, cpu_times


def test_the_longest_modules_exist_once_each() -> None:
    assert len(set(LONGEST_FIRST)) == len(LONGEST_FIRST)
    missing = [m for m in LONGEST_FIRST if not (REPO / m).is_file()]
    assert missing == [], f"tests/scheduling.py names modules that are not there: {missing}"


SHARED_MODULE = '''
import os
import pytest

@pytest.fixture(scope="module")
def made(tmp_path_factory):
    with open(os.environ["SETUPS"], "a") as f:
        f.write(os.environ.get("PYTEST_XDIST_WORKER", "-") + "\\n")

@pytest.mark.parametrize("n", range(4))
def test_shared(made, n):
    pass

@pytest.mark.parametrize("n", range(4))
def test_free(n):
    pass
'''


@pytest.mark.slow  # starts pytest with two workers
def test_a_module_fixture_is_made_once_under_two_workers(tmp_path: Path) -> None:
    """The tests sharing a module's fixture run on one worker (``--dist loadgroup``, as the README's
    command), so the fixture -- a demo run, a browser's -- is made once, not once a worker."""
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "conftest.py").write_text("from tests.scheduling import schedule\n\n\n"
                                       "def pytest_collection_modifyitems(items):\n    schedule(items)\n")
    (suite / "test_shared.py").write_text(SHARED_MODULE)
    setups = tmp_path / "setups.txt"
    env = {**os.environ, "PYTHONPATH": str(REPO), "SETUPS": str(setups)}
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "--dist",
                          "loadgroup", "--rootdir", str(suite), str(suite)], cwd=suite, env=env,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "8 passed" in run.stdout, run.stdout[-3000:]
    assert len(setups.read_text().splitlines()) == 1, setups.read_text()


def test_niced_work_is_not_counted_busy(tmp_path: Path) -> None:
    """CI's gates run at nice 19 beside the slow lane: their time must not take its third worker."""
    stat = tmp_path / "stat"
    #                 user nice system idle iowait irq softirq steal guest guest_nice
    stat.write_text("cpu  100 5000 20 300 7 1 2 0 0 0\ncpu0 50 2500 10 150 3 0 1 0 0 0\n")
    assert cpu_times(stat) == (120, 5430)
