"""The sites of a simulated fleet: their site files and what happens at each (``simulate --fleet N``).

Site files: :func:`write_fleet_sites` writes ``fleet-0001.yaml`` ... into a directory (the one
``ingest``, ``alerts`` and ``web`` are given with ``--sites DIR``), each the bundled example site
(:func:`stormwatch.resources.example_site`: a rain gauge, an upstream and a downstream turbidity probe,
an ultrasonic level sensor over the sediment basin) with its own site id ``fleet-0001``, gateway id
``gw-fleet-0001`` and, alternately, the Ch. 133 and Ch. 196 rule packs; every device is polled once a
minute. An existing file is left as it is (an operator may have edited it).

Stories: :func:`site_story` gives each site a deterministic mix (seeded by ``seed`` and the site's
index, the same in every process).

The design: docs/simulators.md ("The modules", `simulators/fleetsites.py`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

import yaml

from stormwatch import resources
from stormwatch.simulators.design_storm import Distribution
from stormwatch.simulators.scenario import RainSpec, Scenario, SedimentSpec, StormSpec, TurbiditySpec

#: Site ids of the fleet: ``fleet-`` and the index (1-based) with at least 4 digits.
SITE_PREFIX = "fleet-"
#: Poll interval of every fleet device (event-time seconds).
POLL_INTERVAL_S = 60.0
#: Rule packs given to the fleet's sites in turn.
JURISDICTIONS = ("ch133", "ch196")
#: Hours from a Type II/III design storm's start to its most intense hour (hydrology.md: the peak
#: of the NRCS 24-hour distributions is near hour 12).
PEAK_H = 12.0

StoryKind = Literal["dry", "storm", "plume", "silent_gauge", "basin_full"]
#: How often each story is drawn (weights).
STORY_WEIGHTS: dict[StoryKind, float] = {"dry": 0.35, "storm": 0.35, "plume": 0.12, "silent_gauge": 0.10,
                                         "basin_full": 0.08}
STORM_DEPTHS_IN = ("0.25", "0.4", "0.5", "0.75", "1.0", "1.5", "2.5")


def site_id(index: int, n: int) -> str:
    """The id of fleet site ``index`` (1-based) of ``n``: ``fleet-0001`` (more digits past 9,999 sites)."""
    return f"{SITE_PREFIX}{index:0{max(4, len(str(n)))}d}"


def site_document(template: dict[str, Any], index: int, n: int) -> dict[str, Any]:
    """The site file of fleet site ``index``: ``template`` (a parsed site file) with the fleet's ids,
    rule pack and poll interval."""
    sid = site_id(index, n)
    doc = dict(template)
    doc["site"] = {**template["site"], "id": sid, "name": f"Fleet site {index} of {n}",
                   "jurisdiction": JURISDICTIONS[(index - 1) % len(JURISDICTIONS)]}
    doc["gateway_id"] = f"gw-{sid}"
    doc["devices"] = [{**d, "poll_interval_s": POLL_INTERVAL_S} for d in template["devices"]]
    return doc


def write_fleet_sites(directory: Path, n: int, template: Path | None = None) -> list[Path]:
    """The site files of an ``n``-site fleet in ``directory`` (created), writing the missing ones.

    Args:
        directory: where the site files live.
        n: number of sites (>= 1).
        template: the site file each is made from (default: the bundled example site).

    Returns:
        The ``n`` files, in site order.

    Raises:
        ValueError: ``n`` < 1, or a template that is not a site mapping.
        OSError: the directory or a file cannot be written.
    """
    if n < 1:
        raise ValueError(f"a fleet needs at least one site, got {n}")
    source = template or resources.example_site()
    doc = yaml.safe_load(source.read_text(encoding="utf-8"))
    if not isinstance(doc, dict) or not isinstance(doc.get("site"), dict) or not doc.get("devices"):
        raise ValueError(f"{source}: not a site file (site: and devices: expected)")
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for index in range(1, n + 1):
        path = directory / f"{site_id(index, n)}.yaml"
        if not path.exists():
            text = yaml.safe_dump(site_document(doc, index, n), sort_keys=False)
            tmp = path.with_suffix(".yaml.tmp")
            tmp.write_text(f"# Fleet site {index} of {n} (stormwatch simulate --fleet), from {source.name}\n{text}",
                           encoding="utf-8")
            tmp.replace(path)  # a directory watcher never sees half a file
        paths.append(path)
    return paths


@dataclass(frozen=True)
class SiteStory:
    """What happens at one fleet site during the run.

    Attributes:
        kind: the story (module docstring).
        scenario: the physics (:class:`stormwatch.simulators.scenario.Scenario`) the devices follow.
        silent: ``(from, until)``: the rain gauge does not answer in this event-time interval.
    """

    kind: StoryKind
    scenario: Scenario
    silent: tuple[datetime, datetime] | None = None

    def describe(self) -> str:
        """One line: the story, the storm depth and timing, the silence."""
        storm = self.scenario.rain.storm
        text: str = self.kind
        if storm is not None and self.kind != "dry":
            peak = self.scenario.start + timedelta(hours=storm.start_offset_h + PEAK_H)
            text += f" {storm.depth_in} in {storm.distribution} peaking {peak.isoformat(timespec='minutes')}"
        if self.silent is not None:
            a, b = (t.isoformat(timespec="minutes") for t in self.silent)
            text += f", gauge silent {a}..{b}"
        return text


def site_story(index: int, start: datetime, duration_h: float, seed: int = 1) -> SiteStory:
    """The story of fleet site ``index`` in a run of ``duration_h`` from ``start`` (deterministic).

    Raises:
        ValueError: ``duration_h`` <= 0.
    """
    if duration_h <= 0:
        raise ValueError(f"duration must be > 0 h, got {duration_h}")
    rng = random.Random(f"{seed}:{index}")
    kinds = list(STORY_WEIGHTS)
    kind = rng.choices(kinds, weights=[STORY_WEIGHTS[k] for k in kinds])[0]
    end = start + timedelta(hours=duration_h)
    # the most intense hour somewhere in the middle 70 % of the run; the storm starts 12 h before it
    peak = start + timedelta(hours=duration_h * rng.uniform(0.15, 0.85))
    depth = Decimal(rng.choice(STORM_DEPTHS_IN))
    distribution: Distribution = "type_iii" if rng.random() < 0.5 else "type_ii"
    gain = rng.uniform(2.0, 12.0)  # NTU per in/h: a faint plume
    initial = rng.uniform(0.15, 0.40)
    silent = None
    if kind == "dry":
        peak = end + timedelta(hours=PEAK_H + 6)  # the next storm starts after the run
    elif kind == "plume":
        gain = rng.uniform(40.0, 80.0)
        depth = max(depth, Decimal("0.75"))
    elif kind == "silent_gauge":
        depth = Decimal(rng.choice(("0.25", "0.4", "0.75")))
        at = start + timedelta(hours=duration_h * rng.uniform(0.1, 0.7))
        silent = (at, at + timedelta(minutes=rng.choice((30, 60, 90))))
    elif kind == "basin_full":
        initial = rng.uniform(0.47, 0.49)
        depth = max(depth, Decimal("0.5"))
    sc_start = peak - timedelta(hours=PEAK_H)
    scenario = Scenario(
        name=f"fleet site {index}: {kind}",
        start=min(sc_start, start),
        duration_h=max((end - min(sc_start, start)).total_seconds() / 3600, 1.0),
        rain=RainSpec(storm=StormSpec(distribution=distribution, depth_in=depth,
                                      start_offset_h=(sc_start - min(sc_start, start)).total_seconds() / 3600)),
        turbidity=TurbiditySpec(background_ntu=rng.uniform(4.0, 20.0), gain_ntu_per_in_h=gain),
        sediment=SedimentSpec(initial_fraction=initial),
    )
    return SiteStory(kind, scenario, silent)
