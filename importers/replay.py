"""``stormwatch replay``: what would this rain file have triggered?

The file is imported (the same code as ``stormwatch import``) into a temporary embedded SQLite
store as the only device of a synthetic single-gauge site: a tipping bucket whose profile is
``device_profiles/tipping_bucket_modbus_counter.yaml`` with the file's tip size (written to a
temporary profile directory), under the chosen jurisdiction's rule pack. The stored readings are
read back in event-time order, fed to :class:`stormwatch.alerts.engine.Engine` and flushed; the events are
the same :class:`~stormwatch.contract.Event` objects ``stormwatch demo --json`` prints.

The design: docs/importing.md ("The modules", `importers/replay.py`).
"""

from __future__ import annotations

import itertools
import logging
import statistics
import tempfile
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Literal

import yaml

from stormwatch.alerts.backfill import Evaluation, evaluate
from stormwatch.alerts.packs import load_pack, load_site_pack
from stormwatch.alerts.rules.storm import StormRule
from stormwatch.clock import Clock
from stormwatch.config import SiteConfig, parse_site
from stormwatch.contract import Event
from stormwatch.display import counts, plural
from stormwatch.errors import InputError
from stormwatch.importers.identity import IMPORT_GATEWAY
from stormwatch.importers.load import Fraction, ImportSummary, dry_polls, import_file
from stormwatch.importers.options import ImportOptions
from stormwatch.profiles import ProfileLibrary
from stormwatch.stores.urls import open_store

log = logging.getLogger(__name__)

Silence = Literal["dry", "gap"]

#: The profile the synthetic gauge is derived from (only the tip size changes).
BASE_GAUGE_PROFILE = "tipping_bucket_modbus_counter"
#: Name of the generated profile, the site and the device of a replay.
REPLAY_PROFILE = "replay_tipping_bucket"
REPLAY_SITE = "replay"
REPLAY_DEVICE = "rain"
#: ``boot`` of the dry-poll readings replay adds in ``dry`` mode (never stored).
DRY_BOOT = "replay-dry"

_TICK = timedelta(microseconds=1)

#: Events that say "this storm (or this silence) requires action", printed by default.
TRIGGER_KINDS = frozenset({"storm_inspection_due", "data_gap"})


class ReplayError(InputError):
    """The file cannot be replayed (the message says why)."""


@dataclass(frozen=True)
class ReplayResult:
    """Events of a replay.

    Attributes:
        evaluation: the backfill's result (events, storms in progress, data gaps, summary).
        summary: the import summary (rows read, rejected...).
        site: the synthetic site.
    """

    evaluation: Evaluation
    summary: ImportSummary
    site: SiteConfig

    @property
    def events(self) -> list[Event]:
        """Every event, in the order the engine emitted them."""
        return self.evaluation.events

    def triggered(self) -> list[Event]:
        """The events that require action (:data:`TRIGGER_KINDS`)."""
        return [e for e in self.events if e.kind in TRIGGER_KINDS]


def _write_gauge_profile(directory: Path, base: ProfileLibrary, options: ImportOptions) -> None:
    assert options.tips is not None
    data = base.get(BASE_GAUGE_PROFILE).model_dump(mode="json", exclude_none=True)
    data["model"] = REPLAY_PROFILE
    data["description"] = f"Replay gauge: {data['description']} -- tip size {options.tips.size} {options.tips.unit}"
    data["counter"]["resolution"] = f"{options.tips.size} {options.tips.unit}"
    (directory / f"{REPLAY_PROFILE}.yaml").write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")


def pack_choices(jurisdiction: str, given: dict[str, str] | None = None) -> dict[str, str]:
    """Every option of the pack with the choice ``given`` names, else the pack's default (a replay
    chooses for the user, saying so: :func:`replay_file` logs the defaults it took).

    Raises:
        stormwatch.alerts.packs.PackError: unknown jurisdiction, option or choice.
    """
    pack = load_pack(jurisdiction, options=given or {}, source="--option")
    return {name: (given or {}).get(name, option.default) for name, option in pack.options.items()}


def replay_site(profiles: ProfileLibrary, jurisdiction: str, tz: str, dry_gap_hours: float | None,
                poll_interval_s: float, options: dict[str, str] | None = None) -> SiteConfig:
    """The synthetic single-gauge site (``profiles`` must hold :data:`REPLAY_PROFILE`); ``options``:
    its choices among the pack's options (:func:`pack_choices`).

    Raises:
        stormwatch.alerts.packs.PackError: unknown jurisdiction.
        stormwatch.config.ConfigError: an invalid override.
    """
    rules: dict[str, dict[str, float]] = {}
    if dry_gap_hours is not None:
        storm = load_pack(jurisdiction, options=options).first(StormRule)
        if storm is None:
            raise ReplayError(f"jurisdiction {jurisdiction!r} has no storm rule: --dry-gap-hours has nothing to set")
        rules[storm[0]] = {"dry_gap_hours": dry_gap_hours}
    return parse_site({
        "site": {"id": REPLAY_SITE, "name": "replay of a rain file", "jurisdiction": jurisdiction, "timezone": tz},
        "gateway_id": IMPORT_GATEWAY,
        "devices": [{"id": REPLAY_DEVICE, "profile": REPLAY_PROFILE, "poll_interval_s": poll_interval_s,
                     "transport": {"kind": "serial", "port": "replay"}}],
        "rain_gauge": REPLAY_DEVICE,
        "rules": rules,
        "options": options or {},
    }, "replay site", profiles)


def dry_poll_interval(dry_gap: timedelta) -> timedelta:
    """Spacing of the dry polls of ``dry`` mode: half the dry gap, at most one hour."""
    return min(timedelta(hours=1), dry_gap / 2)


def replay_file(path: Path, options: ImportOptions, clock: Clock, *, jurisdiction: str = "ch133",
                dry_gap_hours: float | None = None, silence: Silence = "dry",
                profiles: ProfileLibrary | None = None, progress: Fraction | None = None,
                pack_options: dict[str, str] | None = None) -> ReplayResult:
    """Replay a rain file through the rules of ``jurisdiction``.

    Args:
        path: the file.
        options: format options; ``options.tips`` is required. Times without an offset are read
            in ``options.tz``, else UTC (a replay has no site; the summary says which).
        clock: time base of the import's validator.
        jurisdiction: rule pack (``ch133``, ``ch196``...).
        dry_gap_hours: overrides the pack's storm dry gap.
        silence: ``dry`` or ``gap`` (module docstring).
        profiles: where the base gauge profile is read (default: ``device_profiles/``).
        progress: ``progress(fraction)``, 0 to 1: the import is the first half, the rules the second.
        pack_options: choices among the pack's options (``--option``); the others take the pack's
            default (logged).

    Raises:
        ReplayError: not a rain file, a pack without a storm rule, or no readings in the file.
        stormwatch.importers.load.ImportFailed: the file cannot be read as configured.
        stormwatch.alerts.packs.PackError, stormwatch.alerts.engine.EngineError: the rules cannot be built.
    """
    if options.tips is None:
        raise ReplayError("replay runs the storm rule (R1) over a rain file: give --tip-mm MM or --tip-in IN "
                          "(a single turbidity probe has no background for R2, a level sensor no basin for R3)")
    chosen = pack_choices(jurisdiction, pack_options)
    for name, choice in chosen.items():
        if name not in (pack_options or {}):
            log.info("replay: pack %s options.%s = %s (the pack's default; --option %s=CHOICE to choose)",
                     jurisdiction, name, choice, name)
    if load_pack(jurisdiction, options=chosen).first(StormRule) is None:
        with_options = " with " + ", ".join(f"{k}={v}" for k, v in chosen.items()) if chosen else ""
        raise ReplayError(f"pack {jurisdiction} has no storm-inspection rule (R1){with_options}; nothing to replay")
    options = options.in_zone("UTC", "default")  # no site: UTC, said beside the events (--tz for the logger's)
    assert options.tz is not None
    base = profiles or ProfileLibrary()
    with tempfile.TemporaryDirectory(prefix="stormwatch-replay-") as tmp:
        work = Path(tmp)
        _write_gauge_profile(work, base, options)
        lib = ProfileLibrary(work)
        cfg = replay_site(lib, jurisdiction, options.tz, dry_gap_hours, 60.0, chosen)
        store = open_store(f"sqlite:///{work / 'replay.db'}", clock)
        try:
            half = (lambda f: progress(f / 2)) if progress is not None else None
            summary = import_file(path, cfg, REPLAY_DEVICE, lib, store, options, clock, half)
            readings = store.query_readings(REPLAY_SITE, device=REPLAY_DEVICE, quantity="rain_tips")
            if not readings:
                rejected = sum(summary.rejected_rows.values())
                why = (f": {rejected} of {plural(summary.rows_read, 'row')} rejected "
                       f"({counts(summary.rejected_rows)}); first: {summary.rejects[0].detail}"
                       if summary.rejects else "")
                raise ReplayError(f"{path}: no rain readings to replay{why}")
            gap = timedelta(hours=load_site_pack(cfg).first(StormRule)[1].dry_gap_hours)  # type: ignore[index]
            if silence == "dry":
                every = dry_poll_interval(gap)
                store.write_readings(dry_polls(readings, every, DRY_BOOT))
            else:
                spacing = [(b.time - a.time).total_seconds() for a, b in itertools.pairwise(readings)]
                every = timedelta(seconds=max(1.0, statistics.median(spacing) if spacing else 60.0))
            cfg = replay_site(lib, jurisdiction, options.tz, dry_gap_hours, every.total_seconds(), chosen)
            rest = (lambda f: progress(0.5 + f / 2)) if progress is not None else None
            evaluation = evaluate(cfg, lib, store, readings[0].time, readings[-1].time + _TICK, progress=rest)
        finally:
            store.close()
    log.info("replay %s: %s, %s, %s in progress", path, plural(evaluation.readings, "reading"),
             plural(len(evaluation.events), "event"), plural(len(evaluation.in_progress), "storm"))
    return ReplayResult(evaluation, summary, cfg)
