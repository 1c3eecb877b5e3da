"""The gateway process: load the site, pick the clock, run :class:`gateway.service.Gateway` until
``--until`` or SIGTERM/SIGINT. Shared by ``stormwatch gateway`` and the lean ``python -m gateway``.

``python -m gateway`` imports only what polling needs (no typer, no ingest/alerts/simulator
packages), which keeps a field gateway's resident memory low (benchmarks/gateway.py).
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from datetime import datetime
from pathlib import Path

from stormwatch.clock import Clock, ScenarioClock, WallClock
from stormwatch.config import SiteConfig
from stormwatch.profiles import ProfileLibrary

log = logging.getLogger(__name__)


def pick_clock(clock_file: Path | None) -> Clock:
    """The clock of a ``stormwatch simulate`` clock file, else ``STORMWATCH_SIM_*``, else the wall clock.

    Raises:
        simulators.clock_file.ClockFileError: an unreadable clock file (a ValueError naming it).
    """
    if clock_file is not None:
        from simulators.clock_file import read_clock_file

        return read_clock_file(clock_file)
    return ScenarioClock.from_env(dict(os.environ)) or WallClock()


def run_gateway(
    cfg: SiteConfig, profiles: ProfileLibrary, clock: Clock, broker: str, state_dir: Path, until: datetime | None
) -> None:
    """Run the gateway in this process until ``until`` (clock time) or a SIGTERM/SIGINT.

    Raises:
        whatever :class:`gateway.service.Gateway` raises at construction (bad profile, device,
        broker URL).
    """
    from gateway.service import Gateway

    # The gateway reports device failures itself (one ERROR per outage, gateway.health); pymodbus
    # would log an ERROR for every timed-out request of a dead device.
    logging.getLogger("pymodbus").setLevel(logging.CRITICAL)
    gw = Gateway(cfg, profiles, clock, broker, state_dir)
    if threading.current_thread() is threading.main_thread():
        def _on_signal(signum: int, _frame: object) -> None:
            log.info("signal %d: stopping the gateway", signum)
            threading.Thread(target=gw.stop, daemon=True).start()

        signal.signal(signal.SIGTERM, _on_signal)
        signal.signal(signal.SIGINT, _on_signal)
    gw.run(until)
