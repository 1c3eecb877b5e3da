"""Checks across the site files of a fleet: every gateway needs its own id (``stormwatch gateway --check``).

Two gateways configured with one gateway id connect to the broker with one MQTT client id
(:func:`stormwatch.gateway.publisher.client_id`) and take the session from each other at every
reconnect (:mod:`stormwatch.runtime.mqtttakeover`), and their readings carry one gateway
name. A gateway id is therefore unique across the fleet -- also across sites, since a reading's
identity ``(gateway, boot, seq)`` does not name the site -- and no two gateways may end up with one
client id (``stormwatch-<site>-<gateway>`` joins with ``-``, which identifiers may contain).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from stormwatch.config import SiteConfig
from stormwatch.gateway.publisher import client_id

#: Site file names found in a directory given to ``--site``.
SITE_PATTERNS = ("*.yaml", "*.yml")


def site_files(paths: Sequence[Path]) -> list[Path]:
    """``paths`` with each directory replaced by its ``*.yaml``/``*.yml`` files (sorted, not recursive).

    Raises:
        ValueError: a directory holding no site file, or a path that does not exist.
    """
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            found = sorted({f for pattern in SITE_PATTERNS for f in path.glob(pattern) if f.is_file()})
            if not found:
                raise ValueError(f"--site {path}: directory holds no site file (*.yaml, *.yml)")
            files += found
        elif path.exists():
            files.append(path)
        else:
            raise ValueError(f"--site {path}: no such file or directory")
    return list(dict.fromkeys(files))


def fleet_conflicts(sites: Sequence[tuple[Path, SiteConfig]]) -> list[str]:
    """One message per gateway id, or MQTT client id, that more than one site file uses (``[]``: none).

    Args:
        sites: each site file with its validated configuration.
    """
    by_gateway: dict[str, list[str]] = defaultdict(list)
    by_client: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for path, cfg in sites:
        by_gateway[cfg.gateway_id].append(f"{path} (site {cfg.site.id})")
        by_client[client_id(cfg.site.id, cfg.gateway_id)].append((str(path), cfg.gateway_id))
    problems = [f"gateway id {gateway!r} is used by {' and '.join(where)}: give each gateway its own id"
                for gateway, where in by_gateway.items() if len(where) > 1]
    for cid, users in by_client.items():
        if len(users) > 1 and len({gateway for _, gateway in users}) > 1:  # same id: reported above
            problems.append(f"MQTT client id {cid!r} is shared by {' and '.join(p for p, _ in users)}: "
                            "rename a site or gateway id")
    return problems
