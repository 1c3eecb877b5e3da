"""The gateway process: run :class:`stormwatch.gateway.service.Gateway` until ``--until`` or
SIGTERM/SIGINT. Shared by ``stormwatch gateway`` (``--no-exec``) and the lean ``python -m stormwatch.gateway``.

The lean process runs a compiled plan (:mod:`stormwatch.gateway.plan`) and imports no pydantic, typer,
ingest/alerts/simulator packages (the clock file is read by :mod:`stormwatch.clock`),
which keeps a field gateway's resident memory low (benchmarks/gateway.py;
tests/gateway/test_plan.py checks the imports).
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from stormwatch.clock import Clock
from stormwatch.gateway.plan import GatewayPlan

if TYPE_CHECKING:
    from stormwatch.config import SiteConfig
    from stormwatch.gateway.service import Gateway
    from stormwatch.profiles import ProfileLibrary

log = logging.getLogger(__name__)


def run_plan(plan: GatewayPlan, clock: Clock, broker: str, state_dir: Path, until: datetime | None,
             clock_floor: datetime | None = None, batch: bool = False, *, confirm: str = "stored",
             stats_interval_s: float = 60.0) -> None:
    """Run a compiled plan in this process until ``until`` (clock time) or a SIGTERM/SIGINT.

    ``clock_floor``: no reading before the clock reaches it (default: the build date for the wall
    clock; :mod:`stormwatch.gateway.clockfloor`). ``batch``: one message per poll cycle; ``confirm``:
    a reading leaves the outbox when ingest confirms it ``stored`` or on the ``broker``'s PUBACK
    (:class:`stormwatch.gateway.publisher.MqttPublisher`). ``stats_interval_s``: real seconds between
    the counter lines.

    Raises:
        whatever :meth:`stormwatch.gateway.service.Gateway.from_plan` raises (unsupported device, broker URL).
    """
    from stormwatch.gateway.service import Gateway

    # The gateway reports device failures itself (one ERROR per outage, stormwatch.gateway.health); pymodbus
    # would log an ERROR for every timed-out request of a dead device.
    logging.getLogger("pymodbus").setLevel(logging.CRITICAL)
    gw = Gateway.from_plan(plan, clock, broker, state_dir, clock_floor=clock_floor, batch=batch, confirm=confirm,
                           stats_interval_s=stats_interval_s)
    if threading.current_thread() is threading.main_thread():
        def _on_signal(signum: int, _frame: object) -> None:
            log.info("signal %d: stopping the gateway", signum)
            threading.Thread(target=gw.stop, daemon=True).start()

        signal.signal(signal.SIGTERM, _on_signal)
        signal.signal(signal.SIGINT, _on_signal)
    if getattr(clock, "follows_mqtt", False):
        _join_lockstep(clock, gw)
    try:
        gw.run(until)
    finally:
        if getattr(clock, "follows_mqtt", False):
            clock.close()  # type: ignore[attr-defined]


def _join_lockstep(clock: Clock, gw: Gateway) -> None:
    """The gateway on the lockstep clock over MQTT: its polling threads are the clock's workers
    (gateway/schedule.py); an instant is done once ingest confirmed every reading stored."""
    from stormwatch.gateway.schedule import StoredParticipant
    from stormwatch.runtime.mqttclock import FollowerClock

    assert isinstance(clock, FollowerClock)
    clock.add(StoredParticipant(f"gateway {gw.gateway_id} (stored-acknowledgements)", gw.outbox_depth))
    clock.made_by = lambda: {gw.boot: gw.readings_made}
    threading.Thread(target=clock.run, name="lockstep", daemon=True).start()
    clock.wait_released()  # no poll before ingest and the engine listen


def run_gateway(
    cfg: SiteConfig, profiles: ProfileLibrary, clock: Clock, broker: str, state_dir: Path, until: datetime | None,
    clock_floor: datetime | None = None,
) -> None:
    """Compile ``cfg`` with ``profiles`` and :func:`run_plan` it (in this process).

    Raises:
        profiles.ProfileError, stormwatch.gateway.plan.PlanError: the site does not compile; otherwise as
        :func:`run_plan`.
    """
    from stormwatch.gateway.plan import compile_plan

    run_plan(compile_plan(cfg, profiles), clock, broker, state_dir, until, clock_floor)


def write_plan(plan: GatewayPlan, path: Path) -> Path:
    """Write ``plan`` as JSON to ``path`` atomically (temp file + rename); returns ``path``.

    Raises:
        OSError: the directory cannot be written.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(plan.to_json(), encoding="utf-8")
    os.replace(tmp, path)
    return path


def read_plan(path: Path) -> GatewayPlan:
    """The plan in ``path``.

    Raises:
        stormwatch.gateway.plan.PlanError: unreadable file, bad JSON or layout (the file is named).
    """
    from stormwatch.gateway.plan import PlanError

    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise PlanError(f"{path}: cannot read: {exc}") from exc
    return GatewayPlan.from_json(text, str(path))
