"""Files stormwatch reads at run time, wherever it is installed, and the user's own directories.

Everything read at run time (device profiles, rule packs, scenarios, the example site, dashboard
JSON) ships inside the ``stormwatch`` package and is found with :mod:`importlib.resources`, so a
wheel installed anywhere runs exactly like a checkout. Users add their own profiles and packs in
directories named on the command line (``stormwatch --profiles DIR --packs DIR COMMAND``) or in
the environment (``STORMWATCH_PROFILES``, ``STORMWATCH_PACKS``: ``os.pathsep``-separated lists);
those are searched **before** the built-ins, so a user file of the same name takes precedence.

This module imports nothing heavy (the lean gateway process may use it).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

#: Environment variables naming user directories (``os.pathsep``-separated), searched first.
PROFILES_ENV = "STORMWATCH_PROFILES"
PACKS_ENV = "STORMWATCH_PACKS"


def builtin_dir(package: str, *parts: str) -> Path:
    """A directory shipped inside an installed ``stormwatch`` package.

    Args:
        package: the dotted package, e.g. ``"stormwatch.device_profiles"``.
        parts: sub-directories below it, e.g. ``"packs"``.

    Returns:
        A real file-system path (stormwatch is always installed unzipped: a wheel or an editable
        install).

    Raises:
        RuntimeError: the package is not on the file system (a zipped install).
    """
    root = resources.files(package)
    for part in parts:
        root = root.joinpath(part)
    path = Path(str(root))
    if not path.is_dir():
        raise RuntimeError(f"{package}/{'/'.join(parts)} is not a directory on disk ({root!r})")
    return path


def builtin_profiles_dir() -> Path:
    """The built-in device profiles (``device_profiles/`` in the repository)."""
    return builtin_dir("stormwatch.device_profiles")


def builtin_packs_dir() -> Path:
    """The built-in jurisdiction rule packs (``alerts/packs/`` in the repository)."""
    return builtin_dir("stormwatch.alerts", "packs")


def builtin_scenarios_dir() -> Path:
    """The built-in simulation scenarios (``simulators/scenarios/`` in the repository)."""
    return builtin_dir("stormwatch.simulators", "scenarios")


def builtin_scenarios() -> list[str]:
    """The names of the built-in scenarios (``default`` first)."""
    names = sorted(p.stem for p in builtin_scenarios_dir().glob("*.yaml"))
    return sorted(names, key=lambda n: n != "default")


def dashboards_json_dir() -> Path:
    """The rendered Grafana dashboards (``dashboards/json/`` in the repository)."""
    return builtin_dir("stormwatch.dashboards", "json")


def examples_dir() -> Path:
    """The bundled example site files (``examples/`` in the repository)."""
    return builtin_dir("stormwatch.examples")


def example_site() -> Path:
    """The example site file the demo runs (``examples/site.yaml`` in the repository)."""
    return examples_dir() / "site.yaml"


def env_dirs(variable: str) -> list[Path]:
    """The directories an environment variable names (``os.pathsep``-separated; empty parts skipped)."""
    value = os.environ.get(variable, "")
    return [Path(p) for p in value.split(os.pathsep) if p.strip()]


def search_path(explicit: Iterable[Path] | Path | None, variable: str, builtin: Path) -> list[Path]:
    """The directories to search, first match wins: ``explicit``, then ``$variable``, then ``builtin``.

    Duplicates are removed (by resolved path), keeping the first place.
    """
    if isinstance(explicit, Path):
        explicit = [explicit]
    ordered = [*(explicit or ()), *env_dirs(variable), builtin]
    seen: set[Path] = set()
    out: list[Path] = []
    for d in ordered:
        key = d.resolve()
        if key not in seen:
            seen.add(key)
            out.append(d)
    return out


@dataclass(frozen=True)
class Found:
    """One named file on a search path: ``name`` (the file stem), its ``path`` and ``origin``.

    ``origin`` is ``"built-in"`` for a file shipped with stormwatch, else ``"user"``; ``shadows``
    lists the later files of the same name it hides.
    """

    name: str
    path: Path
    origin: str
    shadows: tuple[Path, ...] = ()


def find_all(directories: Sequence[Path], builtin: Path, suffix: str = ".yaml") -> list[Found]:
    """Every ``*<suffix>`` file on ``directories`` by name, the first directory winning.

    Missing directories are skipped (the caller reports them where that matters).
    """
    found: dict[str, Found] = {}
    builtin_key = builtin.resolve()
    for directory in directories:
        if not directory.is_dir():
            continue
        origin = "built-in" if directory.resolve() == builtin_key else "user"
        for path in sorted(directory.glob(f"*{suffix}")):
            name = path.name[: -len(suffix)]
            if name in found:
                first = found[name]
                found[name] = Found(first.name, first.path, first.origin, (*first.shadows, path))
            else:
                found[name] = Found(name, path, origin)
    return [found[k] for k in sorted(found)]


def find_one(name: str, directories: Sequence[Path], suffix: str = ".yaml") -> Path | None:
    """The first ``<directory>/<name><suffix>`` that exists, or ``None``."""
    for directory in directories:
        path = directory / f"{name}{suffix}"
        if path.is_file():
            return path
    return None
