"""The rule registry: every rule kind is ONE module under ``alerts/rules/``.

A rule module declares, at module level, ``KIND = RuleKind(...)``:

* its **pack schema** (``params``: a :class:`~stormwatch.alerts.rules.params.RuleParams` subclass whose
  ``kind`` literal is the pack's ``kind:`` value);
* its **device roles** (:class:`Role`: which site device it reads, and the quantity it must report);
* its **event kinds** and their **typed details** (:class:`EventKindSpec`; a kind that opens a work
  order names the order kind);
* its **factory** (``build(context)`` → the rule state fed by the engine, or ``None`` with the
  reason logged when the site lacks what it needs).

The design: docs/rules.md ("The rule modules", `alerts/rules/registry.py`).
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import os
import pkgutil
import sys
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Literal, Protocol

from stormwatch.contract import EVENT_KINDS, EventDetails, NoDetails
from stormwatch.errors import InputError

if TYPE_CHECKING:
    from stormwatch.alerts.rules import Rule
    from stormwatch.alerts.rules.params import RuleParams
    from stormwatch.config import SiteConfig
    from stormwatch.profiles import DeviceProfile, ProfileLibrary

log = logging.getLogger(__name__)

#: Directories of user rule modules (``:``-separated), searched after the built-ins.
RULES_ENV = "STORMWATCH_RULES"
#: Package the user's rule modules are loaded under.
USER_PACKAGE = "stormwatch_user_rules"


#: The charts a work order's evidence can be (:attr:`EventKindSpec.chart`).
EvidenceChart = Literal["rain", "turbidity", "basin"]


class RegistryError(InputError):
    """A rule module that cannot be loaded or declares a kind twice; the message names the module's
    file (and, for a module that does not load, the line), never a pack that merely uses a kind."""


@dataclass(frozen=True)
class EventKindSpec:
    """One event kind.

    Attributes:
        kind: the wire ``kind`` (``storm_inspection_due``).
        details: its typed details (:class:`stormwatch.contract.EventDetails` subclass).
        summary: one line for docs/asyncapi.yaml.
        opens: the work-order kind it opens (``storm_inspection``), or ``None``.
        inspection: the order it opens is an inspection (reports and cadences count it).
        closes: the work-order kind it completes (``sampling``): the open order of the same
            ``(site, rule, occurrence)`` is completed at the event's time -- the work the order asked
            for was done and a reading shows it (a recorded sample closes its reminder); or ``None``.
        chart: the chart the order it opens shows as evidence (the web desk's order page): ``rain``
            (the site's gauge), ``turbidity`` (the discharge point its occurrence key names,
            :func:`stormwatch.alerts.rules.occurrence`; no key: the site's one point) or ``basin``
            (the basin its key names); ``None``: no chart.
    """

    kind: str
    details: type[EventDetails] = NoDetails
    summary: str = ""
    opens: str | None = None
    inspection: bool = False
    closes: str | None = None
    chart: EvidenceChart | None = None


@dataclass(frozen=True)
class Role:
    """A device a rule reads, named in the site file.

    Attributes:
        name: the role's name: ``roles: {<name>: <device id>}`` in the site file, or one of the
            structured roles of :meth:`stormwatch.config.SiteConfig.device_for_role`.
        quantity: the quantity that device must report (its profile checked), or ``None``.
        summary: what the device is for.
    """

    name: str
    quantity: str | None = None
    summary: str = ""


class OrderBook(Protocol):
    """What a rule reads of the work-order book (:class:`stormwatch.alerts.workorders.WorkOrders`)."""

    def last_completed(self, site: str, kinds: tuple[str, ...]) -> datetime | None:
        """Completion time of the site's latest completed order of one of ``kinds``."""

    def latest_period(self, site: str, rule: str) -> tuple[datetime, datetime] | None:
        """``(event_time, due_at)`` of the site's latest order of ``rule``."""


@dataclass(frozen=True)
class RuleContext:
    """What a rule's factory gets: the site, its profiles, the pack entry, the work-order book.

    Attributes:
        cfg: the site.
        profiles: device profiles.
        rule_id: the pack's id for this rule (``R1``).
        params: the validated pack entry (with the site's overrides).
        workorders: the work-order book, or ``None`` (events without orders).
        pack_name: the pack's name (for log lines).
    """

    cfg: SiteConfig
    profiles: ProfileLibrary
    rule_id: str
    params: RuleParams
    workorders: OrderBook | None
    pack_name: str

    @property
    def site(self) -> str:
        return self.cfg.site.id

    def device(self, role: str) -> str | None:
        """The device id the site gives ``role`` (``None``: the site has no such device)."""
        return self.cfg.device_for_role(role)

    def profile(self, device_id: str) -> DeviceProfile:
        """The profile of one of the site's devices."""
        return self.profiles.get(self.cfg.device(device_id).profile)


class BuildError(ValueError):
    """The site cannot be watched by this rule as configured (the engine raises it as EngineError)."""


@dataclass(frozen=True)
class RuleKind:
    """A rule kind (see the module docstring).

    Attributes:
        kind: the pack's ``kind:`` value (``storm``).
        params: the pack schema.
        build: the factory (``None``: a rule the engine does not run itself, e.g. ``report``,
            which the work-order book applies). It returns one rule state, several (one per
            discharge point or basin of the site, each with its own occurrences), or ``None``.
        events: the event kinds it emits.
        roles: the devices it reads.
        summary: one line for docs.
    """

    kind: str
    params: type[RuleParams]
    build: Callable[[RuleContext], Rule | Sequence[Rule] | None] | None
    events: tuple[EventKindSpec, ...] = ()
    roles: tuple[Role, ...] = ()
    summary: str = ""
    module: str = field(default="", compare=False)


@dataclass(frozen=True)
class Registry:
    """The loaded rule kinds and event kinds (immutable once built)."""

    kinds: dict[str, RuleKind]
    events: dict[str, EventKindSpec]
    sources: dict[str, str]  # kind or event kind -> module

    def rule_kind(self, kind: str) -> RuleKind:
        """The rule kind of a pack's ``kind:`` value.

        Raises:
            KeyError: no loaded module declares it.
        """
        return self.kinds[kind]

    def opening_kinds(self) -> dict[str, str]:
        """event kind → work-order kind, for the events that open an order."""
        return {e.kind: e.opens for e in self.events.values() if e.opens is not None}

    def closing_kinds(self) -> dict[str, str]:
        """event kind → work-order kind, for the events that complete an order (``closes``)."""
        return {e.kind: e.closes for e in self.events.values() if e.closes is not None}

    def evidence_charts(self) -> dict[str, EvidenceChart]:
        """work-order kind → the chart its page shows as evidence (:attr:`EventKindSpec.chart`)."""
        return {e.opens: e.chart for e in self.events.values() if e.opens is not None and e.chart is not None}

    def inspection_orders(self) -> tuple[str, ...]:
        """Work-order kinds that are inspections."""
        return tuple(sorted({e.opens for e in self.events.values() if e.opens is not None and e.inspection}))


def _file(module: ModuleType) -> str:
    """Where a rule module is, for a person: its file (a user module's name is made up)."""
    return str(getattr(module, "__file__", None) or module.__name__)


def _load_failure(path: Path, exc: BaseException) -> str:
    """``<file>:<line>: cannot load rule module: <why>`` for a module whose code failed: the line of
    a syntax error, or the module's own line where the exception came from."""
    if isinstance(exc, SyntaxError) and exc.lineno is not None:
        return f"{path}:{exc.lineno}: cannot load rule module: {exc.msg}"
    line = None
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == str(path):
            line = tb.tb_lineno
        tb = tb.tb_next
    where = f"{path}:{line}" if line is not None else str(path)
    return f"{where}: cannot load rule module: {type(exc).__name__}: {exc}"


def _declared(module: ModuleType) -> tuple[RuleKind | None, tuple[EventKindSpec, ...]]:
    kind = getattr(module, "KIND", None)
    events = tuple(getattr(module, "EVENTS", ()))
    if kind is not None and not isinstance(kind, RuleKind):
        raise RegistryError(f"{_file(module)}: KIND must be a RuleKind, not {type(kind).__name__}")
    return kind, events


def _builtin_modules() -> Iterable[ModuleType]:
    import stormwatch.alerts.rules as package

    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        if info.name.startswith("_") or info.name == "registry":
            continue
        yield importlib.import_module(f"{package.__name__}.{info.name}")


def rule_directories(env: dict[str, str] | None = None) -> list[Path]:
    """The user's rule directories from ``$STORMWATCH_RULES`` (``:``-separated; missing ones skipped)."""
    value = (env if env is not None else os.environ).get(RULES_ENV, "")
    return [Path(p) for p in value.split(os.pathsep) if p]


def _user_modules(directories: Iterable[Path]) -> Iterable[ModuleType]:
    for directory in directories:
        if not directory.is_dir():
            log.warning("rule directory %s (from $%s) does not exist: skipped", directory, RULES_ENV)
            continue
        for path in sorted(directory.glob("*.py")):
            if path.name.startswith("_"):
                continue
            name = f"{USER_PACKAGE}.{path.stem}"
            module = sys.modules.get(name)
            if module is None or getattr(module, "__file__", None) != str(path):
                spec = importlib.util.spec_from_file_location(name, path)
                if spec is None or spec.loader is None:
                    raise RegistryError(f"{path}: not a Python module")
                module = importlib.util.module_from_spec(spec)
                sys.modules[name] = module
                try:
                    spec.loader.exec_module(module)
                except Exception as exc:
                    del sys.modules[name]
                    raise RegistryError(_load_failure(path, exc)) from None
            yield module


def build_registry(modules: Iterable[ModuleType]) -> Registry:
    """A registry of the kinds ``modules`` declare; registers their event kinds with the contract.

    Raises:
        RegistryError: a rule kind or event kind declared twice, or a malformed declaration.
    """
    kinds: dict[str, RuleKind] = {}
    events: dict[str, EventKindSpec] = {}
    sources: dict[str, str] = {}
    files: dict[str, str] = {}  # the same keys: the module's file, for messages
    for module in modules:
        kind, extra = _declared(module)
        specs = list(extra)
        if kind is not None:
            if kind.kind in kinds:
                raise RegistryError(f"rule kind {kind.kind!r} declared twice: by {files['rule:' + kind.kind]} "
                                    f"and by {_file(module)} (rename one module's kind)")
            declared = kind.params.model_fields.get("kind")
            if declared is None or kind.kind not in getattr(declared.annotation, "__args__", ()):
                raise RegistryError(f"{_file(module)}: {kind.params.__name__}.kind must be Literal[{kind.kind!r}]")
            kinds[kind.kind] = kind
            sources["rule:" + kind.kind] = module.__name__
            files["rule:" + kind.kind] = _file(module)
            specs += kind.events
        for spec in specs:
            if spec.kind in events and events[spec.kind] != spec:
                raise RegistryError(f"event kind {spec.kind!r} declared twice: by {files[spec.kind]} and by "
                                    f"{_file(module)}")
            events[spec.kind] = spec
            sources[spec.kind] = module.__name__
            files[spec.kind] = _file(module)
    for spec in events.values():
        try:
            EVENT_KINDS.register(spec.kind, spec.details)
        except ValueError as exc:
            raise RegistryError(f"{files[spec.kind]}: {exc}") from exc
    return Registry(kinds, events, sources)


_lock = threading.Lock()
_loaded: dict[tuple[str, ...], Registry] = {}


def rule_kinds(directories: Iterable[Path] | None = None) -> Registry:
    """The registry of the built-in rule modules and the user's (``$STORMWATCH_RULES`` unless
    ``directories`` is given); built once per set of directories.

    Raises:
        RegistryError: see :func:`build_registry`; a user module that cannot be loaded.
    """
    dirs = list(directories) if directories is not None else rule_directories()
    key = tuple(str(d) for d in dirs)
    with _lock:
        found = _loaded.get(key)
        if found is None:
            found = _loaded[key] = build_registry([*_builtin_modules(), *_user_modules(dirs)])
        return found


def describe(registry: Registry) -> list[dict[str, Any]]:
    """One row per rule kind (kind, module, events, roles), for ``stormwatch rules list`` and docs."""
    return [{"kind": k.kind, "module": registry.sources["rule:" + k.kind],
             "events": [e.kind for e in k.events], "roles": [r.name for r in k.roles]}
            for k in registry.kinds.values()]
