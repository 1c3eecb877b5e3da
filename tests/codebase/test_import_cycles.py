"""No module of stormwatch imports itself through others: the module import graph has no cycle.

Every import counts -- at module level, under ``if TYPE_CHECKING:`` and inside functions -- as a
reader follows them all (grimp, the graph import-linter builds, sees each import statement). A
cycle means two modules that can be understood only together; docs/architecture.md "Layers" says
how to break one (the shared part in a module of its own, below both).
"""

from __future__ import annotations

import sys
from pathlib import Path

import grimp
import pytest

PACKAGE = "stormwatch"


def cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The graph's cycles: each strongly connected set of two or more modules, sorted (Tarjan)."""
    edges = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(start: str) -> None:
        # iterative: the graph is deeper than the interpreter's recursion limit may allow
        work = [(start, iter(edges[start]))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            for nxt in successors:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(edges[nxt])))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    members = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        members.append(member)
                        if member == node:
                            break
                    if len(members) > 1:
                        found.append(sorted(members))

    for module in sorted(edges):
        if module not in index:
            visit(module)
    return sorted(found)


def _described(graph: grimp.ImportGraph, cycle: list[str]) -> str:
    lines = []
    for importer in cycle:
        for imported in cycle:
            if graph.direct_import_exists(importer=importer, imported=imported):
                for detail in graph.get_import_details(importer=importer, imported=imported):
                    lines.append(f"  {importer}:{detail['line_number']}: {detail['line_contents']}")
    return "\n".join(lines)


def test_no_module_import_cycle() -> None:
    graph = grimp.build_graph(PACKAGE, cache_dir=None)
    found = cycles(graph)
    assert not found, "module import cycles:\n" + "\n\n".join(_described(graph, c) for c in found)


def test_a_planted_cycle_is_found() -> None:
    """The check is not vacuous: an import of the alert engine planted in the contract, which the
    engine imports, makes one cycle through both (and the modules between them)."""
    graph = grimp.build_graph(PACKAGE, cache_dir=None)
    assert graph.direct_import_exists(importer="stormwatch.alerts.engine", imported="stormwatch.contract")
    graph.add_import(importer="stormwatch.contract", imported="stormwatch.alerts.engine")
    (cycle,) = cycles(graph)
    assert {"stormwatch.alerts.engine", "stormwatch.contract"} <= set(cycle)


def test_imports_in_functions_and_under_type_checking_count(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A cycle hidden in a function and behind TYPE_CHECKING is still one."""
    pkg = tmp_path / "planted"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from planted import b\n    return b\n")
    (pkg / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from planted import a\n")
    (pkg / "c.py").write_text("from planted import a\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "planted", raising=False)
    assert cycles(grimp.build_graph("planted", cache_dir=None)) == [["planted.a", "planted.b"]]
