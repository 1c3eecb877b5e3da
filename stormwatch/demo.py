"""``stormwatch demo``: a construction site living through a storm, end to end, in about a minute.

Composes the real services with :class:`stormwatch.pipeline.Pipeline` on embedded defaults
(amqtt broker in-process, SQLite store in a temporary directory) or on real servers
(``--broker``, ``--influx``), prints a timeline of ordinance events as they happen, then a summary
of the events and the open work orders. ``--json`` prints one JSON object per event instead.
"""

from __future__ import annotations

import json
import logging
import signal
import sys
import tempfile
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

import typer

from stormwatch import resources
from stormwatch.cliutil import fail
from stormwatch.config import ConfigError, SiteConfig, load_site
from stormwatch.contract import Event
from stormwatch.profiles import ProfileError, ProfileLibrary
from stormwatch.workdir import prepare_workdir

if TYPE_CHECKING:  # the pipeline imports every service; load it only when the demo runs
    from stormwatch.pipeline import PipelineResult
    from stormwatch.web.demo_desk import DemoDesk

log = logging.getLogger(__name__)

DEFAULT_SITE = resources.example_site()

#: Above this the gateway cannot keep a 60 s poll grid (60 s simulated = 6 ms real).
MAX_SPEED = 10_000.0


def influx_store_url(url: str, database: str) -> str:
    """Turn ``--influx`` into a store URL.

    ``http://host:8086`` (or ``https``) means InfluxDB 1.x's HTTP API with ``database``; store URLs
    (``influx1://``, ``influx2://``, ``sqlite://``) are passed through.

    Raises:
        ValueError: another scheme.
    """
    for scheme in ("influx1://", "influx1s://", "influx2://", "influx2s://", "sqlite://"):
        if url.startswith(scheme):
            return url
    for scheme, store in (("http://", "influx1://"), ("https://", "influx1s://")):
        if url.startswith(scheme):
            return f"{store}{url[len(scheme):].rstrip('/')}/{database}"
    raise ValueError(f"--influx {url!r}: expected http://host:port (InfluxDB 1.x) or an influx1:// / influx2:// URL")


def _local(t: datetime | None, tz: ZoneInfo) -> str:
    return "-" if t is None else t.astimezone(tz).strftime("%a %d %b %H:%M %Z")


def describe_event(e: Event, tz: ZoneInfo) -> str:
    """One timeline line for a person: local time, kind, the facts, the deadline and the citation."""
    facts = ""
    if e.tips is not None and e.depth_in is not None:
        facts = f"{e.depth_in:.2f} in ({e.tips} tip{'' if e.tips == 1 else 's'})"
        if e.storm_start is not None and e.storm_end is not None:
            facts += f", rain {_local(e.storm_start, tz)} – last tip {_local(e.storm_end, tz)}"
    elif e.downstream_ntu is not None and e.upstream_ntu is not None:
        facts = f"downstream {e.downstream_ntu:.1f} NTU vs upstream {e.upstream_ntu:.1f} NTU"
    elif e.lost_capacity is not None:
        facts = f"{e.lost_capacity * 100:.1f} % of design storage lost"
        if e.sediment_depth_ft is not None:
            facts += f" (sediment {e.sediment_depth_ft:.2f} ft)"
    elif e.gap_start is not None:
        facts = f"no data {_local(e.gap_start, tz)} – {_local(e.gap_end, tz)}"
    due = f"  due {_local(e.due_at, tz)}" if e.due_at else ""
    wo = f"  {e.work_order}" if e.work_order else ""
    return f"{_local(e.event_time, tz):>22}  {e.kind:<26} {facts}{due}  [{e.citation}]{wo}"


def demo(
    site: Path = typer.Option(DEFAULT_SITE, "--site", help="Site YAML; its transports are moved to free local ports."),
    scenario: str = typer.Option("default", "--scenario", help="Bundled scenario name or a scenario YAML file."),
    speed: float = typer.Option(
        1500.0, "--speed", min=1.0, max=MAX_SPEED,
        help="Simulated seconds per real second (1 = real time; the default runs 32 h in about 80 s).",
    ),
    storm_depth_in: str | None = typer.Option(
        None, "--storm-depth-in", help="Design-storm depth in inches (default: the scenario's, 1.2)."
    ),
    rain_file: Path | None = typer.Option(
        None, "--rain-file", help="Drive the simulated gauge with a real tip record instead of the design storm."
    ),
    rain_delimiter: str = typer.Option(",", "--rain-delimiter", help="Field delimiter of --rain-file."),
    rain_time_format: str = typer.Option(
        "%Y-%m-%dT%H:%M:%S", "--rain-time-format", help="strptime format of --rain-file's time column."
    ),
    rain_tz: str = typer.Option("UTC", "--rain-tz", help="IANA zone of naive times in --rain-file."),
    rain_tip_mm: str | None = typer.Option(None, "--rain-tip-mm", help="Tip size of --rain-file in mm (e.g. 0.2)."),
    rain_tip_in: str | None = typer.Option(None, "--rain-tip-in", help="Tip size of --rain-file in inches."),
    rain_from: datetime | None = typer.Option(None, "--rain-from", help="Use --rain-file rows from this time."),
    rain_until: datetime | None = typer.Option(None, "--rain-until", help="Use --rain-file rows before this time."),
    broker: str | None = typer.Option(
        None, "--broker", envvar="STORMWATCH_BROKER", help="Use this MQTT broker (mqtt://HOST:PORT) instead of amqtt."
    ),
    influx: str | None = typer.Option(
        None, "--influx", envvar="STORMWATCH_INFLUX",
        help="Store readings in InfluxDB: http://HOST:PORT (1.x, database 'stormwatch') or influx1:// / influx2://.",
    ),
    database: str = typer.Option("stormwatch", "--database", help="InfluxDB 1.x database for --influx http://..."),
    workdir: Path | None = typer.Option(
        None, "--workdir",
        help="Keep the run's state here (store, outbox, work orders) to inspect afterwards; a rerun on the same "
             "directory starts clean (the previous run's state is deleted, nothing counted twice). "
             "Default: a temporary directory.",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object per event (and nothing else) on stdout."),
    web: bool = typer.Option(
        False, "--web", help="Serve the web desk (portfolio, charts, work orders) on 127.0.0.1 during the run and "
        "after it, until Ctrl-C; the login passwords are printed."),
    web_port: int = typer.Option(8080, "--web-port", min=0, max=65535, help="Port of --web (0: any free port)."),
) -> None:
    """Run a simulated construction site through a storm, end to end, and show the ordinance events.

    Simulated devices speak real protocols (Modbus TCP, Modbus RTU and serial on pseudo-terminals);
    the gateway polls them and publishes to MQTT; ingest stores the readings; the alert engine
    applies the site's village code and opens work orders. The default scenario -- a 1.2-inch NRCS
    Type II storm, a basin already 45 % full, a turbidity plume downstream -- takes about a minute.

    Every run starts clean: a rerun with the same --workdir deletes the previous run's state first,
    and a store given with --influx that already holds readings of the run's site and time window
    is refused (the same storm would be counted twice).
    """
    from stormwatch.alerts.packs import PackError, load_pack
    from stormwatch.config import device_profiles
    from stormwatch.mqtt import BrokerUrlError, parse_broker_url
    from stormwatch.pipeline import Pipeline, PipelineError, Progress
    from stormwatch.simulators.cli import build_scenario
    from stormwatch.simulators.rain_record import RainRecordError
    from stormwatch.simulators.scenario import ScenarioError, SiteScenario

    # Everything a user can get wrong is checked here, before any service starts.
    try:
        profiles = ProfileLibrary()
        cfg: SiteConfig = load_site(site, profiles)
        load_pack(cfg.site.jurisdiction, cfg.rules, source=str(site))
        sc = build_scenario(
            scenario, storm_depth_in=storm_depth_in, rain_file=rain_file, rain_tip_mm=rain_tip_mm,
            rain_tip_in=rain_tip_in, rain_time_format=rain_time_format, rain_delimiter=rain_delimiter,
            rain_tz=rain_tz, rain_from=rain_from, rain_until=rain_until,
        )
        SiteScenario(sc, cfg, device_profiles(cfg, profiles))  # builds the tip series: bad rain input fails here
        store_url = influx_store_url(influx, database) if influx else None
        if broker is not None:
            parse_broker_url(broker)
        removed = prepare_workdir(workdir) if workdir is not None else []
        if web and influx:
            raise ValueError("--web reads the embedded SQLite store: leave out --influx")
    except (ConfigError, ProfileError, PackError, ScenarioError, RainRecordError, BrokerUrlError,
            ValueError, OSError) as exc:
        fail(str(exc))

    tz = cfg.site.tz
    out = sys.stdout

    def on_event(e: Event) -> None:
        if as_json:
            out.write(json.dumps(e.to_wire(), ensure_ascii=False) + "\n")
        else:
            out.write(describe_event(e, tz) + "\n")
        out.flush()

    def on_progress(p: Progress) -> None:
        log.info(
            "simulated %s (%3.0f %%): %d readings made, %d stored, %d events",
            _local(p.sim_time, tz), p.fraction * 100, p.readings_made, p.readings_stored, p.events,
        )

    # SIGTERM (e.g. from `timeout`) ends the run like Ctrl-C: services stop, the temp dir goes.
    signal.signal(signal.SIGTERM, _raise_interrupt)
    tmp = None if workdir else tempfile.TemporaryDirectory(prefix="stormwatch-demo-")
    work = workdir or Path(tmp.name)  # type: ignore[union-attr]
    hours = (sc.end - sc.start).total_seconds() / 3600
    if not as_json:
        typer.echo(
            f"stormwatch demo: site {cfg.site.id} ({cfg.site.jurisdiction}), {hours:.0f} simulated hours from "
            f"{_local(sc.start, tz)} at {speed:g}x (about {hours * 3600 / speed:.0f} s)\n"
            f"broker: {broker or 'embedded amqtt'}; store: {store_url or 'embedded SQLite in ' + str(work)}"
            + (f"\n{work}: the previous run's state was removed (every run starts clean)" if removed else "")
            + "\n"
        )
    desk = None
    try:
        if web:
            desk = _start_desk(site, cfg.site.id, work, web_port)
        result = Pipeline(
            cfg, profiles, sc, work, speed=speed, broker_url=broker, store_url=store_url,
            on_event=on_event, on_progress=on_progress,
        ).run()
        if not as_json:
            typer.echo("")
            typer.echo(_summary(result, tz))
        if desk is not None:
            typer.echo(f"the run is over; {desk.server.url} still serves it (Ctrl-C to stop)", err=as_json)
            desk.wait()
    except PipelineError as exc:
        fail(str(exc), 1)
    finally:
        if desk is not None:
            desk.close()
        if tmp is not None:
            tmp.cleanup()


def _start_desk(site: Path, site_id: str, work: Path, port: int) -> DemoDesk:
    """Start ``--web``; prints where and how to log in (stderr, so ``--json`` stays clean)."""
    from stormwatch.web.demo_desk import DemoDesk
    from stormwatch.web.server import DeskSetupError

    try:
        desk = DemoDesk(site, site_id, work, port)
        typer.echo(desk.start() + "\n", err=True)
    except (DeskSetupError, RuntimeError, OSError) as exc:
        fail(f"--web: {exc}", 1)
    return desk


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _summary(result: PipelineResult, tz: ZoneInfo) -> str:
    lines = ["Summary"]
    depth = result.resolution.depth_in(result.stored_tips)
    lines.append(
        f"  rain: {result.stored_tips} tips = {float(depth):.2f} in stored "
        f"(scenario produced {result.scenario_tips} tips)"
    )
    lines.append(
        f"  readings: {result.readings_made} made by the gateway, {result.readings_stored} stored; "
        f"dead-lettered: {sum(result.dead_lettered.values())} {dict(result.dead_lettered) or ''}".rstrip()
    )
    kinds: dict[str, int] = {}
    for e in result.events:
        kinds[e.kind] = kinds.get(e.kind, 0) + 1
    lines.append("  events: " + ", ".join(f"{k} ×{n}" for k, n in sorted(kinds.items())))
    open_orders = [w for w in result.workorders if w.status != "completed"]
    ended = result.ended_at
    overdue = sum(1 for w in open_orders if w.is_overdue(ended))
    lines.append(f"  work orders: {len(open_orders)} not completed" + (f" ({overdue} overdue)" if overdue else ""))
    for w in open_orders:
        late = "  overdue" if w.is_overdue(ended) else ""
        lines.append(f"    {w.id}  {w.kind:<20} due {_local(w.due_at, tz):<26} [{w.citation}]  {w.status}{late}")
    lines.append(
        f"  ran {result.sim_hours:.0f} simulated hours in {result.wall_seconds:.0f} s; store: {result.store_url}"
    )
    return "\n".join(lines)


def register(app: typer.Typer) -> None:
    """Add ``stormwatch demo``."""
    app.command("demo")(demo)
