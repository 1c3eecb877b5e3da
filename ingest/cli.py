"""``stormwatch ingest``: consume readings from MQTT into a store."""

from __future__ import annotations

import logging
import signal
from pathlib import Path

import typer

from stormwatch.clock import CLOCK_FILE_ENV, Clock, service_clock
from stormwatch.config import SiteConfig
from stormwatch.ingest.consumer import Ingest
from stormwatch.ingest.heap import steady_heap
from stormwatch.ingest.metrics import serve_metrics
from stormwatch.ingest.validate import Validator
from stormwatch.profiles import ProfileLibrary
from stormwatch.runtime.cliutil import fail, max_age_option, max_future_option, site_loader
from stormwatch.runtime.mqtt import BrokerUrlError, parse_broker_url
from stormwatch.runtime.partition import Partition
from stormwatch.runtime.sitedir import ServiceSites
from stormwatch.stores.base import StoreError
from stormwatch.stores.urls import StoreUrlError, open_store, redact

log = logging.getLogger(__name__)

DEFAULT_STORE = "sqlite:///./var/stormwatch.db"


def ingest_command(
    site: list[Path] = typer.Option([], "--site", "-s", metavar="FILE",
                                    help="The site's YAML file (repeat for several sites)."),
    sites_dir: Path | None = typer.Option(None, "--sites", metavar="DIR", file_okay=False,
                                          help="A directory of site files: every *.yaml in it, watched (a file "
                                               "added, changed or removed is picked up within seconds; a broken "
                                               "one is refused with its error, the others keep running)."),
    partition: str | None = typer.Option(None, "--partition", metavar="PART",
                                         help="Store only part K of N of the sites, written K/N, subscribing to "
                                              "their topics alone (for brokers without shared subscriptions; "
                                              "run N ingests with 1/N ... N/N)."),
    site_ids: list[str] = typer.Option([], "--site-id", metavar="SITE_ID",
                                       help="Store only this site of --site/--sites (repeatable)."),
    broker: str = typer.Option("mqtt://127.0.0.1:1883", "--broker", "-b", envvar="STORMWATCH_BROKER", metavar="URL",
                               help="The MQTT broker: mqtt://\\[USER:PASS@]HOST:PORT (mqtts:// for TLS)."),
    store: str = typer.Option(DEFAULT_STORE, "--store", envvar="STORMWATCH_STORE", metavar="URL",
                              help="Where readings go: sqlite:///path.db (or a bare path), "
                                   "influx1://\\[user:pass@]host:port/db\\[?rp=POLICY], "
                                   "influx2://host:port?org=ORG&bucket=BUCKET&token=TOKEN."),
    client_id: str = typer.Option("stormwatch-ingest", "--client-id", metavar="ID",
                                  help="MQTT client id; keep it fixed so the broker keeps this consumer's "
                                       "persistent session (messages queued while it is down)."),
    share_group: str | None = typer.Option(None, "--share-group", metavar="GROUP",
                                           help="Subscribe as $share/GROUP/... so several ingests split the "
                                                "load (Mosquitto; not amqtt)."),
    batch_size: int = typer.Option(1000, "--batch-size", min=1, metavar="N", help="Messages per store write."),
    batch_ms: int = typer.Option(200, "--batch-ms", min=0, metavar="MS", help="Max wait (ms) to fill a batch."),
    lockstep: bool = typer.Option(False, "--lockstep",
                                  help="Run on the lockstep clock `stormwatch simulate --lockstep` conducts over "
                                       "MQTT (waits for it); with it --batch-ms 0 is the fast choice."),
    max_inflight: int = typer.Option(4000, "--max-inflight", min=1, metavar="N",
                                     help="Most messages delivered and not yet acknowledged (match the broker's "
                                          "max_inflight_messages; keep above --batch-size)."),
    retained_late: bool = typer.Option(True, "--retained-late/--no-retained-late",
                                       help="Store retained readings as late (stale). Use --no-retained-late "
                                            "behind amqtt, which flags queued messages as retained."),
    max_future_s: float = max_future_option(),
    max_age_s: float = max_age_option(),
    late_after_s: float | None = typer.Option(None, "--late-after-s", min=0, metavar="SECONDS",
                                              help="Store readings older than this on arrival as late "
                                                   "(default: only retained readings are late)."),
    metrics_port: int = typer.Option(0, "--metrics-port", min=0, max=65535, envvar="STORMWATCH_METRICS_PORT",
                                     metavar="PORT",
                                     help="Serve Prometheus metrics on this HTTP port (0 = off; "
                                          "conventionally 9108)."),
    metrics_addr: str = typer.Option("127.0.0.1", "--metrics-addr", metavar="ADDRESS",
                                     help="Address for --metrics-port (0.0.0.0 to expose it)."),
    stats_interval_s: float = typer.Option(60.0, "--stats-interval-s", min=1, metavar="SECONDS",
                                           help="Seconds between the counter log lines."),
    clock_file: Path | None = typer.Option(None, "--clock-file", envvar=CLOCK_FILE_ENV, metavar="FILE",
                                           help="Run on the simulated clock `stormwatch simulate --clock-file` "
                                                "writes (waits for it); default: the wall clock."),
) -> None:
    """Store the readings of the sites' gateways from MQTT; refuse bad ones with a reason (dead letters).

    Each message is acknowledged only after its batch is durably written: a crash loses nothing.

    Dead letters (with a reason) go to the store and to the topic stormwatch/v1/deadletter.

    Stop with Ctrl-C or SIGTERM: the pending batch is flushed first.
    """
    if max_inflight < batch_size:
        fail(f"--max-inflight {max_inflight} is below --batch-size {batch_size}: a batch never fills (delivery "
             "stops at --max-inflight unacknowledged messages, so every write waits --batch-ms); raise "
             "--max-inflight or lower --batch-size")
    profiles = ProfileLibrary()
    try:
        parts = Partition.parse(partition, site_ids)
        # each file checked as every command checks it: itself, its profiles, its rule pack (stormwatch.app.cli)
        watched = ServiceSites(site, sites_dir, site_loader(profiles), parts)
        sites = list(watched.load().values())
        clock = _follower(broker, sites) if lockstep else service_clock(clock_file)
        validator = Validator.for_sites(sites, profiles, clock, max_future_s=max_future_s,
                                        max_age_s=max_age_s, late_after_s=late_after_s)
    except ValueError as exc:  # InputError (the site file, a profile, the rule pack, the options)
        fail(str(exc))
    try:
        parse_broker_url(broker)  # before the store is opened (or created): a typo starts nothing
    except BrokerUrlError as exc:
        fail(f"--broker: {exc}")
    try:
        sink = open_store(store, clock=clock)
    except StoreUrlError as exc:
        fail(f"--store {redact(store)}: {exc}")
    except StoreError as exc:
        fail(f"--store {redact(store)}: {exc}", 1)
    try:
        ingest = Ingest(validator, sink, broker, client_id=client_id, clock=clock, batch_size=batch_size,
                        batch_ms=batch_ms, share_group=share_group, retained_is_late=retained_late,
                        stats_interval_s=stats_interval_s, max_inflight=max_inflight,
                        sites=None if parts.is_everything else [cfg.site.id for cfg in sites])
    except BrokerUrlError as exc:
        sink.close()
        fail(f"--broker: {exc}")
    except ValueError as exc:  # --share-group with a partition
        sink.close()
        fail(str(exc))

    if lockstep:
        import threading
        follower = clock

        def follow_clock() -> None:
            while not ingest.wait_connected(1.0):  # ready only once subscribed
                pass
            follower.run()  # type: ignore[attr-defined]

        threading.Thread(target=follow_clock, name="lockstep", daemon=True).start()

    def _stop(signum: int, _frame: object) -> None:
        log.info("signal %d: flushing and stopping", signum)
        ingest.stop()

    metrics = None
    if metrics_port:
        try:
            metrics = serve_metrics(ingest, metrics_port, metrics_addr)
        except OSError as exc:
            sink.close()
            fail(f"--metrics-port {metrics_port}: {exc}")
        log.info("Prometheus metrics on http://%s:%d/metrics", metrics_addr, metrics.server_port)

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    shown = ", ".join(sorted(validator.sites)[:10]) + (f", ... ({len(validator.sites)} sites)"
                                                       if len(validator.sites) > 10 else "")
    log.info("ingest: sites %s (%s) -> store %s", shown or "none yet", watched.describe(), redact(store))
    def follow(current: dict[str, SiteConfig], _changes: object) -> None:
        validator.set_sites(current)
        if not parts.is_everything:
            ingest.set_sites(current)

    watched.watch(follow)
    steady_heap()
    try:
        ingest.run()
    finally:
        watched.stop()
        if metrics is not None:
            metrics.shutdown()
        sink.close()


def register(app: typer.Typer) -> None:
    """Add ``stormwatch ingest`` to the command line."""
    app.command("ingest")(ingest_command)


def _follower(broker: str, sites: list[SiteConfig]) -> Clock:
    """The lockstep clock over MQTT of the one site stored (stormwatch.runtime.mqttclock)."""
    from stormwatch.runtime.mqttclock import FollowerClock

    if len(sites) != 1:
        fail(f"--lockstep: store exactly one site (got {len(sites)})")
    return FollowerClock(broker, sites[0].site.id, "ingest")
