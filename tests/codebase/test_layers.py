"""Layers you can see (issue 13 item 2): the import contract of ``.importlinter`` holds, and the
packages of stormwatch import each other without cycles.

Top to bottom: the composition (:mod:`stormwatch.app`), the desks (web, report, dashboards), the
simulators, the importers, the alert engine, ingest and the gateway (independent), the service
runtime (:mod:`stormwatch.runtime`: CLI plumbing, logging, the MQTT session, site directories,
partitions), the stores, and the contract (readings, events, topics, clocks, units, codec, profiles,
site config and their helpers). ``.ci/run`` runs ``lint-imports`` in its gate section too.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import grimp

from tests.conftest import REPO


def test_the_import_contract_is_kept() -> None:
    lint = Path(sys.executable).parent / "lint-imports"
    run = subprocess.run([str(lint), "--config", str(REPO / ".importlinter"), "--no-cache"], cwd=REPO,
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 kept, 0 broken" in run.stdout


def test_the_contract_has_no_exception() -> None:
    """No import is exempted (issue 13: the shared CLI helpers, gateway and ingest once reached up to
    the rule packs; the composition root now hands them the pack check,
    stormwatch.runtime.cliutil.provide_site_checks)."""
    text = (REPO / ".importlinter").read_text(encoding="utf-8")
    assert "ignore_imports" not in text
    lint = Path(sys.executable).parent / "lint-imports"
    run = subprocess.run([str(lint), "--config", str(REPO / ".importlinter"), "--no-cache"], cwd=REPO,
                         capture_output=True, text=True)
    assert "KEPT" in run.stdout and "ignored" not in run.stdout, run.stdout


def _package(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2])


def test_no_cycle_between_the_packages() -> None:
    """The graph of stormwatch.<package> → stormwatch.<package> imports (every import, lazy ones too)
    has no cycle."""
    graph = grimp.build_graph("stormwatch", include_external_packages=False)
    edges: dict[str, set[str]] = {}
    for module in graph.modules:
        for imported in graph.find_modules_directly_imported_by(module):
            a, b = _package(module), _package(imported)
            if a != b and b != "stormwatch":
                edges.setdefault(a, set()).add(b)
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                raise AssertionError("package cycle: " + " -> ".join([*path[path.index(nxt):], nxt]))
            if nxt not in state:
                visit(nxt)
        path.pop()
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node)


def test_a_store_module_importing_a_service_would_break_the_contract(tmp_path: Path) -> None:
    """The contract is not vacuous: the same layers with the stores above ingest fail on today's code
    (ingest imports the stores)."""
    text = (REPO / ".importlinter").read_text(encoding="utf-8")
    services, runtime, stores = ("    stormwatch.ingest | stormwatch.gateway\n", "    stormwatch.runtime\n",
                                 "    stormwatch.stores\n")
    swapped = text.replace(services + runtime + stores, stores + services + runtime)
    assert swapped != text
    config = tmp_path / "swapped.ini"
    config.write_text(swapped, encoding="utf-8")
    lint = Path(sys.executable).parent / "lint-imports"
    run = subprocess.run([str(lint), "--config", str(config), "--no-cache"], cwd=REPO, capture_output=True, text=True)
    assert run.returncode != 0 and "stormwatch.ingest" in run.stdout and "BROKEN" in run.stdout


def test_every_package_and_module_has_a_layer() -> None:
    """A new module of stormwatch cannot sit outside the layers (unnamed modules are unconstrained)."""
    import re

    named = set(re.findall(r"stormwatch\.(\w+)", (REPO / ".importlinter").read_text(encoding="utf-8")))
    package = REPO / "stormwatch"
    present = {p.stem for p in package.iterdir()
               if (p.suffix == ".py" or (p.is_dir() and (p / "__init__.py").exists())) and not p.name.startswith("_")
               and p.name not in ("device_profiles", "examples")}  # data only
    assert present - named == set(), "add these to a layer of .importlinter"
