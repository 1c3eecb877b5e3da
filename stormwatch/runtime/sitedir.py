"""Sites as a directory (``--sites DIR`` for ingest, alerts and web): load every site file, keep up with changes.

An SMO's county is hundreds to thousands of site files; sites open and close every week. A service
given ``--sites DIR`` loads every ``*.yaml``/``*.yml`` file of the directory (not recursive; names
starting with ``.`` and editors' ``~`` backups are ignored) and then looks again every
``interval_s`` real seconds (default 2) -- a file's modification time, size and inode tell what
changed -- so a site file added, changed or removed is picked up without a restart; a broken file
is reported and the others keep running.

The design: docs/runtime.md ("The modules", `stormwatch/runtime/sitedir.py`).
"""

from __future__ import annotations

import logging
import os
import stat
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from stormwatch.config import SiteConfig
from stormwatch.display import plural
from stormwatch.errors import InputError
from stormwatch.runtime.partition import Partition

log = logging.getLogger(__name__)

#: Site file names in a directory.
PATTERNS = ("*.yaml", "*.yml")
_SUFFIXES = tuple(p.removeprefix("*") for p in PATTERNS)
#: Real seconds between two looks at the directory.
DEFAULT_INTERVAL_S = 2.0

_Stamp = tuple[int, int, int]  # (mtime_ns, size, inode)


@dataclass
class SiteChanges:
    """What one look at the directory found.

    Attributes:
        added: sites watched from now on.
        changed: sites whose configuration changed (the new configuration).
        removed: ids of sites no longer watched.
        refused: ``(file, error)`` of every file refused in this look (newly broken ones only).
    """

    added: list[SiteConfig] = field(default_factory=list)
    changed: list[SiteConfig] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    refused: list[tuple[Path, str]] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.added or self.changed or self.removed)

    def describe(self) -> str:
        """``"2 added (a, b), 1 changed (c), 1 removed (d)"`` (what happened, for a log line)."""
        parts = []
        for what, ids in (("added", [c.site.id for c in self.added]), ("changed", [c.site.id for c in self.changed]),
                          ("removed", self.removed)):
            if ids:
                shown = ", ".join(ids[:5]) + (f", ... ({len(ids) - 5} more)" if len(ids) > 5 else "")
                parts.append(f"{len(ids)} {what} ({shown})")
        return "; ".join(parts) or "no change"


class SiteDirectory:
    """The site files of one directory, kept current (module docstring).

    Args:
        directory: where the site files are.
        load: reads and validates one site file (:func:`stormwatch.runtime.cliutil.site_loader` or
            :func:`stormwatch.alerts.sitefile.load_site_file`: the file, its profiles, its rule pack);
            raises :class:`stormwatch.errors.InputError` (or ``ValueError``) for a file to refuse.
        partition: which sites this process owns (default: all).
        interval_s: real seconds between looks (:meth:`watch`).

    Attributes:
        sites: site id → configuration currently watched.
    """

    def __init__(self, directory: Path, load: Callable[[Path], SiteConfig], partition: Partition | None = None,
                 interval_s: float = DEFAULT_INTERVAL_S) -> None:
        self.directory = directory
        self.load_file = load
        self.partition = partition or Partition.everything()
        self.interval_s = interval_s
        self.sites: dict[str, SiteConfig] = {}
        self._files: dict[Path, tuple[_Stamp, SiteConfig | None]] = {}  # last look: stamp, good config
        self._owner: dict[str, Path] = {}  # site id -> the file that defines it
        self._errors: dict[Path, tuple[_Stamp, str]] = {}  # refused files and the stamp refused
        self._paths: dict[str, Path] = {}  # file name -> its path, made once

    def load(self) -> SiteChanges:
        """The first look: every site file of the directory.

        Raises:
            InputError: the directory does not exist or is not a directory.
        """
        if not self.directory.is_dir():
            raise InputError(f"--sites {self.directory}: not a directory")
        return self.poll()

    def poll(self) -> SiteChanges:
        """Look at the directory once and apply what changed to :attr:`sites` (never raises for a bad file)."""
        changes = SiteChanges()
        stamps = self._stamps()
        gone = [p for p in self._files if p not in stamps]
        for path in gone:
            del self._files[path]
            self._errors.pop(path, None)
        looked = bool(gone)
        for path, stamp in stamps.items():
            known = self._files.get(path)
            if known is not None and known[0] == stamp:
                continue
            looked = True
            previous = known[1] if known is not None else None
            try:
                cfg: SiteConfig | None = self.load_file(path)
            except ValueError as exc:  # InputError (ConfigError, ProfileError, PackError) and pydantic's
                self._refuse(path, stamp, str(exc), previous, changes)
                self._files[path] = (stamp, previous)
                continue
            self._errors.pop(path, None)
            self._files[path] = (stamp, cfg)
        if looked:  # no file new, changed or gone: the sites are those of the last look
            self._apply(changes)
        return changes

    def _stamps(self) -> dict[Path, _Stamp]:
        out: dict[Path, _Stamp] = {}
        try:
            with os.scandir(self.directory) as listing:  # one listing, a stat per site file: every 2 s
                names = sorted(e.name for e in listing if e.name.endswith(_SUFFIXES) and not e.name.startswith("."))
        except OSError as exc:
            log.error("--sites %s: cannot list the directory: %s (keeping the sites watched)", self.directory, exc)
            return {p: s for p, (s, _) in self._files.items()}
        for name in names:
            path = self._paths.get(name)
            if path is None:
                path = self._paths[name] = self.directory / name
            try:
                st = os.stat(path)
            except OSError:
                continue  # removed between the listing and the stat
            if stat.S_ISREG(st.st_mode):
                out[path] = (st.st_mtime_ns, st.st_size, st.st_ino)
        return out

    def _refuse(self, path: Path, stamp: _Stamp, error: str, previous: SiteConfig | None,
                changes: SiteChanges) -> None:
        if self._errors.get(path, (None, ""))[0] == stamp:
            return
        self._errors[path] = (stamp, error)
        error = "; ".join(line.removeprefix(f"{path}: ") for line in error.splitlines())  # one line per file
        keep = (f"; site {previous.site.id} keeps its last good configuration until the file is mended"
                if previous is not None else "; the file is not watched until it is mended")
        log.error("%s: %s%s", path, error, keep)
        changes.refused.append((path, error))

    def _apply(self, changes: SiteChanges) -> None:
        by_id: dict[str, list[Path]] = {}
        for path, (_stamp, cfg) in sorted(self._files.items()):
            if cfg is not None:
                by_id.setdefault(cfg.site.id, []).append(path)
        wanted: dict[str, SiteConfig] = {}
        owner: dict[str, Path] = {}
        for sid, paths in by_id.items():
            # the file that had the id keeps it; another file with the same id is refused
            before = self._owner.get(sid)
            keep = before if before in paths else paths[0]
            for other in paths:
                if other != keep:
                    self._refuse(other, self._files[other][0], f"{other}: site id {sid!r} is already defined by {keep}",
                                 None, changes)
            cfg = self._files[keep][1]
            assert cfg is not None
            owner[sid], wanted[sid] = keep, cfg
        wanted = {sid: cfg for sid, cfg in wanted.items() if self.partition.owns(sid)}
        for sid, cfg in wanted.items():
            old = self.sites.get(sid)
            if old is None:
                changes.added.append(cfg)
            elif old != cfg:
                changes.changed.append(cfg)
        changes.removed = [sid for sid in self.sites if sid not in wanted]
        self.sites = dict(sorted(wanted.items()))
        self._owner = owner

    def known_ids(self) -> set[str]:
        """Every site id a file of the directory defines, owned by this partition or not."""
        return set(self._owner)

    def path_of(self, site_id: str) -> Path | None:
        """The file that defines ``site_id`` (``None``: no file does)."""
        return self._owner.get(site_id)

    def watch(self, on_change: Callable[[SiteChanges], None], stop: threading.Event) -> threading.Thread:
        """Look every :attr:`interval_s` in a daemon thread and call ``on_change`` with every non-empty change
        (after :meth:`load`); ends when ``stop`` is set. A failing ``on_change`` is logged, never fatal."""

        def run() -> None:
            while not stop.wait(self.interval_s):
                try:
                    changes = self.poll()
                    if changes:
                        log.info("--sites %s: %s; %d sites watched", self.directory, changes.describe(),
                                 len(self.sites))
                        on_change(changes)
                except Exception:  # a watcher bug must not take the service down
                    log.exception("--sites %s: watching the directory failed (retrying)", self.directory)

        thread = threading.Thread(target=run, name=f"sites {self.directory}", daemon=True)
        thread.start()
        return thread


class ServiceSites:
    """The sites of one service: ``--site`` files (loaded once) and a ``--sites`` directory (kept current),
    both cut to the service's :class:`~stormwatch.runtime.partition.Partition`.

    Args:
        files: ``--site`` files.
        directory: ``--sites`` directory, or ``None``.
        load: reads and validates one site file (as for :class:`SiteDirectory`).
        partition: the sites this process owns.
        interval_s: real seconds between looks at the directory.
    """

    def __init__(self, files: list[Path], directory: Path | None, load: Callable[[Path], SiteConfig],
                 partition: Partition | None = None, interval_s: float = DEFAULT_INTERVAL_S) -> None:
        self.files = files
        self.partition = partition or Partition.everything()
        self.load_file = load
        self.directory = SiteDirectory(directory, load, self.partition, interval_s) if directory is not None else None
        self.fixed: dict[str, SiteConfig] = {}
        self._stop = threading.Event()

    def load(self) -> dict[str, SiteConfig]:
        """Load every ``--site`` file and the directory's files: site id → configuration.

        A broken file of the directory is refused (logged) and the rest load; a broken ``--site``
        file is an error, as before.

        Raises:
            InputError: neither ``--site`` nor ``--sites`` given, a ``--site`` file that does not load,
                two ``--site`` files with one site id, or a ``--sites`` that is not a directory.
        """
        if not self.files and self.directory is None:
            raise InputError("give the sites to watch: --sites DIR (a directory of site files) or --site FILE")
        seen: set[str] = set()
        for path in self.files:
            cfg = self.load_file(path)
            if cfg.site.id in seen:
                raise InputError(f"{path}: site id {cfg.site.id!r} is already defined by another --site file")
            seen.add(cfg.site.id)
            if self.partition.owns(cfg.site.id):
                self.fixed[cfg.site.id] = cfg
        if self.directory is not None:
            self.directory.load()
        self._check_named(seen)
        return self.current

    def _check_named(self, seen: set[str]) -> None:
        """Every ``--site-id`` names a site: with ``--site`` files alone, an id none of them names is
        refused (a typo never runs a service subscribed to no site, forever); with a watched
        ``--sites`` directory it may come later, so it is logged (WARNING) and watched for.

        Raises:
            InputError: ``--site-id ID: no --site file names it (their sites: ...)``.
        """
        named = self.partition.site_ids
        if named is None:
            return
        known = seen | (self.directory.known_ids() if self.directory is not None else set())
        missing = sorted(named - known)
        if not missing:
            return
        ids = ", ".join(missing)
        if self.directory is None:
            raise InputError(f"--site-id {ids}: no --site file names it (their sites: {', '.join(sorted(seen))})")
        log.warning("--site-id %s: no site file names it yet (--sites %s is watched: it is picked up when one "
                    "does)", ids, self.directory.directory)

    @property
    def current(self) -> dict[str, SiteConfig]:
        """Site id → configuration watched now (a ``--site`` file wins over a directory file with its id)."""
        from_dir = self.directory.sites if self.directory is not None else {}
        return dict(sorted({**from_dir, **self.fixed}.items()))

    def watch(self, on_change: Callable[[dict[str, SiteConfig], SiteChanges], None]) -> None:
        """Keep up with the directory (if any) in a daemon thread: ``on_change(current, changes)`` after each change."""
        if self.directory is not None:
            self.directory.watch(lambda changes: on_change(self.current, changes), self._stop)

    def stop(self) -> None:
        """Stop watching the directory."""
        self._stop.set()

    def describe(self) -> str:
        """Where the sites come from, for the start-up log line."""
        parts = [f"{plural(len(self.fixed), '--site file')}"] if self.files else []
        if self.directory is not None:
            parts.append(f"--sites {self.directory.directory} (watched every {self.directory.interval_s:g} s)")
        if not self.partition.is_everything:
            parts.append(self.partition.describe())
        return ", ".join(parts)
