"""One `stormwatch demo --json` run of a scenario per test session, shared by the tests that read it.

A demo run is the suite's most expensive step; tests that only read a finished run's events, output
or state use :func:`shared_demo` (through the fixtures of tests/conftest.py) instead of a run of their
own. Under pytest-xdist the workers share it: the first to ask runs it under an exclusive file lock in
the session's common temp directory, the others wait on the lock and read what it left (the pattern
pytest-xdist documents for session fixtures). A test that changes a run's state works on a copy
(:meth:`DemoRun.copy_state`); a test of two runs giving the same events compares its own run with
the shared one. docs/architecture.md ("Tests").
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

#: Real seconds a shared run may take (a test's own timeout leaves its setup, the wait for it, to this).
RUN_TIMEOUT_S = 900

@dataclass(frozen=True)
class DemoRun:
    """A finished `stormwatch demo --json --state-dir STATE` run: its exit code, output and state."""

    returncode: int
    stdout: str
    stderr: str
    state: Path  #: read only; copy_state() for a test that writes

    @property
    def events(self) -> list[dict[str, Any]]:
        """The run's events (stdout: one JSON object a line), after checking the run succeeded."""
        assert self.returncode == 0, self.stderr[-3000:]
        return [json.loads(line) for line in self.stdout.splitlines()]

    def copy_state(self, dest: Path) -> Path:
        """The run's state directory copied to ``dest`` (which must not exist), for a test that writes."""
        assert self.returncode == 0, self.stderr[-3000:]
        shutil.copytree(self.state, dest)
        return dest


def demo_env() -> dict[str, str]:
    """The environment of a newcomer's run: none of the ``STORMWATCH_*`` settings of this session."""
    return {k: v for k, v in os.environ.items() if not k.startswith("STORMWATCH_")}


def _run(root: Path, args: tuple[str, ...]) -> DemoRun:
    state = root / "state"
    if state.exists():  # a worker stopped mid-run: the run is made again, from nothing
        shutil.rmtree(state)
    command = [sys.executable, "-m", "stormwatch", "demo", "--json", *args, "--state-dir", str(state)]
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, env=demo_env(), cwd=root)
    except subprocess.TimeoutExpired as exc:  # a failed run for every reader, not one run per reader
        err = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else exc.stderr or ""
        return DemoRun(-1, "", f"{err}\nstormwatch demo {' '.join(args)}: no end after {RUN_TIMEOUT_S} s", state)
    return DemoRun(proc.returncode, proc.stdout, proc.stderr, state)


def shared_demo(factory: pytest.TempPathFactory, worker: str | None, name: str, *args: str) -> DemoRun:
    """The session's one demo run ``name`` (``stormwatch demo --json ARGS``), made by whichever
    worker asks first."""
    base = factory.getbasetemp()
    # under xdist each worker's basetemp is a folder of the session's own temp directory
    root = (base.parent if worker is not None else base) / f"shared-demo-{name}"
    root.mkdir(exist_ok=True)
    done = root / "run.json"
    with open(root / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, or its process dies
        if not done.is_file():
            run = _run(root, args)
            tmp = root / "run.json.tmp"
            tmp.write_text(json.dumps({"returncode": run.returncode, "stdout": run.stdout, "stderr": run.stderr}))
            tmp.replace(done)
    saved = json.loads(done.read_text())
    return DemoRun(saved["returncode"], saved["stdout"], saved["stderr"], root / "state")
