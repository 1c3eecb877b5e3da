"""``stormwatch readings add``: record a manual field reading (transparency tube, hand turbidimeter, pH meter)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import typer

from stormwatch.alerts.sitefile import load_site_file
from stormwatch.display import amount, number
from stormwatch.runtime.cliutil import fail

#: The option of each manual quantity (errors name the option the value came from).
OPTION_OF = {"transparency": "--transparency-cm", "turbidity": "--turbidity-ntu", "ph": "--ph"}

readings_app = typer.Typer(help="Readings entered by hand: transparency tube, grab-sample NTU and pH.",
                           no_args_is_help=True)


@readings_app.command("add")
def add_command(
    site: Path = typer.Option(..., "--site", metavar="FILE", help="The site's YAML file."),
    point: str = typer.Option(..., "--point", metavar="POINT",
                              help="Where the sample was taken: a discharge point's id (turbidity_pair: a site "
                                   "file's one pair; devices are not sampling places)."),
    by: str = typer.Option(..., "--by", metavar="NAME", help="The inspector who took the sample."),
    sampled_at: str | None = typer.Option(None, "--sampled-at", metavar="TIME",
                                          help="When the sample was taken, ISO 8601 (without an offset: the site's "
                                               "local time; default: now). The rules judge it at this time."),
    transparency_cm: float | None = typer.Option(None, "--transparency-cm", metavar="CM",
                                                 help="Transparency tube: cm of water to the first view of the "
                                                      "disk (0-120)."),
    turbidity_ntu: float | None = typer.Option(None, "--turbidity-ntu", metavar="NTU",
                                               help="Grab sample's turbidity from a hand turbidimeter, NTU "
                                                    "(0-4000)."),
    ph: float | None = typer.Option(None, "--ph", metavar="PH", help="Grab sample's pH from a hand meter (0-14)."),
    broker: str | None = typer.Option(None, "--broker", envvar="STORMWATCH_BROKER", metavar="URL",
                                      help="Send it live: the MQTT broker (mqtt://host:1883); ingest stores it and "
                                           "the alert service evaluates it like a sensor's reading."),
    store: str | None = typer.Option(None, "--store", metavar="URL",
                                     help="Or write it straight into the store (sqlite:///FILE, influx1://...); "
                                          "`stormwatch evaluate` then sees it."),
    correct: bool = typer.Option(False, "--correct",
                                 help="Replace the value recorded for this sample (same point, time, inspector and "
                                      "quantity) by the one given: for a mistyped entry. The replaced reading is "
                                      "kept in the store as a superseded dead letter (who, when, both values). "
                                      "With --store only."),
    as_json: bool = typer.Option(False, "--json", help="Print the recorded readings as JSON."),
) -> None:
    """Record what an inspector measured by hand at a discharge point.

    Each value is stored as a reading with source manual and the inspector's name, at the time the
    sample was taken; it reaches the rules like a sensor's reading (a pH below the permit's range,
    a transparency under the benchmark...). The same sample entered twice is recorded once; entered
    again with another value it is refused (the recorded value is kept) -- to fix a mistyped entry,
    enter the right value with --correct.

    Examples:

      stormwatch readings add --site examples/site.yaml --point turbidity_pair --by "J. Rivera"
      --sampled-at 2026-06-01T10:30 --transparency-cm 28 --turbidity-ntu 41.5 --ph 7.9
      --broker mqtt://localhost:1883

      stormwatch readings add --site examples/two-outfalls.yaml --point outfall-2 --by "J. Rivera"
      --ph 9.1 --store sqlite:///var/stormwatch.db

    The example site's one discharge point is its turbidity_pair; a site with discharge_points
    names each (outfall-1, outfall-2 in examples/two-outfalls.yaml). `stormwatch example-site`
    prints the example site file.
    """
    from stormwatch.alerts.cli import parse_when
    from stormwatch.alerts.packs import PackError
    from stormwatch.clock import WallClock
    from stormwatch.config import ConfigError
    from stormwatch.importers.manual import (
        ManualEntry,
        ManualEntryError,
        ManualValueError,
        check_sample_place,
        manual_readings,
        record_manual,
    )
    from stormwatch.profiles import ProfileLibrary
    from stormwatch.runtime.mqtt import BrokerUrlError, parse_broker_url
    from stormwatch.stores.base import StoreError
    from stormwatch.stores.urls import StoreUrlError, open_store, redact

    profiles = ProfileLibrary()
    try:
        cfg = load_site_file(site, profiles)
    except (ConfigError, PackError) as exc:
        fail(str(exc))
    when = parse_when(sampled_at, cfg.site.timezone, "--sampled-at") if sampled_at else datetime.now(UTC)
    values = {q: v for q, v in (("transparency", transparency_cm), ("turbidity", turbidity_ntu), ("ph", ph))
              if v is not None}
    entry = ManualEntry(cfg.site.id, point, when, by, values)
    try:
        check_sample_place(cfg, point)  # where, and the values, before a store is opened (or created) for them
        manual_readings(entry)
    except ManualValueError as exc:
        fail(f"{OPTION_OF[exc.quantity]} {number(exc.value)}: {exc.reason}")
    except ManualEntryError as exc:
        fail(str(exc))
    opened = None
    try:
        settings = parse_broker_url(broker) if broker else None
    except BrokerUrlError as exc:
        fail(f"--broker: {exc}")
    if store:
        try:
            opened = open_store(store)
        except StoreUrlError as exc:
            fail(f"--store {redact(store)}: {exc}")
        except StoreError as exc:
            fail(f"--store {redact(store)}: {exc}", 1)
    try:
        result = record_manual(entry, cfg, profiles, WallClock(), store=opened, broker=settings, correct=correct)
    except ManualEntryError as exc:
        fail(str(exc))
    except StoreError as exc:
        fail(f"store {redact(store or '')}: {exc} (nothing lost: enter it again, it is stored once)", 1)
    finally:
        if opened is not None:
            opened.close()
    refused = {c.reading.identity for c in result.conflicts}
    if as_json:
        typer.echo(json.dumps({"readings": [r.to_wire() for r in result.readings if r.identity not in refused],
                               "stored": result.stored, "already_stored": result.already,
                               "published": result.published,
                               "corrected": [{"quantity": new.quantity, "from": old.value, "to": new.value,
                                              "unit": new.unit} for old, new in result.corrected],
                               "refused": [{"reason": "conflicting_value", "reading": c.reading.to_wire(),
                                            "stored_value": c.stored_value, "detail": c.detail()}
                                           for c in result.conflicts]},
                              ensure_ascii=False))
    else:
        tz = cfg.site.tz
        for r in result.readings:
            if r.identity not in refused:
                typer.echo(f"{r.site}/{r.device}: {r.quantity} {r.value:g} {r.unit} sampled "
                           f"{r.time.astimezone(tz):%Y-%m-%d %H:%M %Z} by {r.raw} (source: manual)")
        for old, new in result.corrected:
            typer.echo(f"corrected: {new.quantity} {old.value:g} -> {new.value:g} {new.unit} (the replaced reading is "
                       "kept in the store as a superseded dead letter; run `stormwatch evaluate` again)")
        if result.published:
            typer.echo(f"sent to {result.published} (QoS 1, acknowledged)")
        else:
            typer.echo(f"stored: {result.stored} new, {result.already} already recorded"
                       + (f", {len(result.corrected)} corrected" if result.corrected else "")
                       + (f", {len(result.conflicts)} refused" if result.conflicts else "")
                       + f" ({redact(store or '')})")
    if result.conflicts:
        tz = cfg.site.tz
        fail("\n".join(
            f"{OPTION_OF[c.reading.quantity]} {number(c.reading.value)}: refused (conflicting_value): "
            f"{c.reading.device} "
            f"{c.reading.quantity} sampled {c.reading.time.astimezone(tz):%Y-%m-%d %H:%M %Z} by {c.reading.raw} is "
            f"already recorded as {amount(c.stored_value, c.stored_unit)}, which is kept; if that was mistyped, enter "
            f"the right value with --correct" for c in result.conflicts))
