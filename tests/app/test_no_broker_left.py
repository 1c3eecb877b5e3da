"""A run that starts Mosquitto never leaves it running, nor its temporary directory: not when Ctrl-C or
SIGTERM comes while the broker starts or just after, nor when its starter is killed
(stormwatch/app/servers.py, stormwatch/app/broker.py; docs/runtime.md)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from stormwatch.app import broker as broker_module
from stormwatch.app import servers
from tests.waits import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.mosquitto]


@pytest.fixture(autouse=True)
def _mosquitto() -> None:
    if servers.find_binary("mosquitto") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true but mosquitto is not installed")
        pytest.skip("mosquitto not installed")


def _children(pid: int, comm: str) -> list[int]:
    """The processes named ``comm`` whose parent is ``pid``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        name, rest = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2:].split()
        if name == comm and int(rest[1]) == pid:
            found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, exited but not yet reaped by its new parent, does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def _config_dir(pid: int) -> Path:
    """The directory of the configuration file Mosquitto ``pid`` runs with (``-c FILE``)."""
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    return Path(argv[argv.index(b"-c") + 1].decode()).parent


class _Demo:
    """`stormwatch demo` in a process of its own, and the Mosquitto it starts."""

    def __init__(self, tmp: Path) -> None:
        self.err = tmp / "err.txt"
        with self.err.open("wb") as e:
            self.proc = subprocess.Popen([sys.executable, "-m", "stormwatch", "demo", "--state-dir", str(tmp / "d")],
                                         stdout=subprocess.DEVNULL, stderr=e)
        self.broker = 0
        self.broker_dir: Path | None = None

    def wait_broker(self) -> None:
        """Until the demo's Mosquitto process exists (polled often: the test means to catch its start)."""
        def started() -> bool:
            assert self.proc.poll() is None, self.err.read_text()
            found = _children(self.proc.pid, "mosquitto")
            if found:
                self.broker = found[0]
                self.broker_dir = _config_dir(self.broker)
            return bool(found)
        wait_until(started, 120, "the demo's Mosquitto", every_s=0.001)

    def close(self) -> None:
        """Kill what the test left running (the demo; before the fix, its broker) and the broker's directory."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if self.broker and _alive(self.broker) and self.broker_dir and self.broker_dir.name.startswith(
                "stormwatch-mosquitto-"):
            os.kill(self.broker, signal.SIGKILL)
        if self.broker_dir is not None:
            shutil.rmtree(self.broker_dir, ignore_errors=True)


@pytest.fixture()
def demo(tmp_path: Path) -> Iterator[_Demo]:
    run = _Demo(tmp_path)
    try:
        yield run
    finally:
        run.close()


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_demo_stopped_as_its_broker_starts_leaves_no_broker(demo: _Demo, signum: int) -> None:
    """The signal lands while Mosquitto starts: the demo is frozen (SIGSTOP) the moment its broker
    process exists -- before it listens, or just after -- then signalled and let go on."""
    demo.wait_broker()
    os.kill(demo.proc.pid, signal.SIGSTOP)
    os.kill(demo.proc.pid, signum)
    os.kill(demo.proc.pid, signal.SIGCONT)
    assert demo.proc.wait(60) == 130, demo.err.read_text()
    assert demo.err.read_text().splitlines()[-1] == "interrupted", demo.err.read_text()
    assert not _alive(demo.broker), f"the demo's Mosquitto {demo.broker} still runs after the demo ended"
    assert demo.broker_dir is not None and not demo.broker_dir.exists(), f"{demo.broker_dir} left behind"


def test_a_killed_demo_leaves_no_broker(demo: _Demo) -> None:
    """SIGKILL (a timeout's kill, the OOM killer): nothing in the demo runs, yet its broker stops."""
    demo.wait_broker()
    demo.proc.kill()
    demo.proc.wait(60)
    wait_until(lambda: not _alive(demo.broker), 30, "the killed demo's Mosquitto to stop")


def test_an_interrupted_start_stops_the_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C while the server comes up (it listens, the wait for it has not returned): no caller
    has it to stop, so its start does."""
    srv = servers.mosquitto(tmp_path / "mq")
    real_wait = servers.wait_port

    def interrupted(port: int, timeout_s: float = 15.0) -> None:
        real_wait(port, timeout_s)
        raise KeyboardInterrupt

    monkeypatch.setattr(servers, "wait_port", interrupted)
    with pytest.raises(KeyboardInterrupt):
        srv.start()
    assert srv.pid == 0 and not srv.running
    with pytest.raises(OSError):
        servers.wait_port(srv.port, 0.2)  # nothing listens on its port any more


def test_a_run_interrupted_after_its_broker_started_stops_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C after the embedded broker started but before the services did: the broker stops and its
    temporary directory goes."""
    from stormwatch.alerts.sitefile import load_site_file
    from stormwatch.app.pipeline import Pipeline
    from stormwatch.profiles import ProfileLibrary
    from stormwatch.resources import example_site
    from stormwatch.simulators.cli import build_scenario

    started: list[tuple[int, Path]] = []
    real_start = broker_module.MosquittoBroker.start

    def start(self: broker_module.MosquittoBroker) -> None:
        real_start(self)
        started.append((self._srv.pid, self._srv.data_dir))

    def interrupted(self: Pipeline) -> object:
        raise KeyboardInterrupt

    monkeypatch.setattr(broker_module.MosquittoBroker, "start", start)
    monkeypatch.setattr(Pipeline, "_clock", interrupted)  # the run's first step once its broker listens
    profiles = ProfileLibrary()
    scenario = build_scenario("default")
    cfg = load_site_file(scenario.site or example_site(), profiles)
    with pytest.raises(KeyboardInterrupt):
        Pipeline(cfg, profiles, scenario, tmp_path / "work", embedded_broker="mosquitto").run()
    ((pid, data_dir),) = started
    try:
        assert not _alive(pid), f"the embedded Mosquitto {pid} still runs"
        assert not data_dir.exists(), f"{data_dir} left behind"
    finally:  # before the fix: what the run left
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
        shutil.rmtree(data_dir, ignore_errors=True)
