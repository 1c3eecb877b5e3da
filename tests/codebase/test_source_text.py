"""Text a reader of the source meets: no "issue N" references (an issue no reader of the repository
can open; name the behaviour or the docs section instead), and module docstrings of at most 15
lines that say what the module is for and point to the docs page holding the design.

The package is ``stormwatch/`` and the folders linked into it (``gateway/``, ``alerts/``, ...);
every text file in them counts, and every Python file of ``tests/``.
"""

from __future__ import annotations

import ast
import io
import os
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

from tests.conftest import REPO

#: A reference to an issue of the tracker: the word "issue" or "issues", any case, then a number (with
#: or without "#" before it). This file builds its samples from :data:`WORD`, so it holds none itself.
ISSUE_REF = re.compile(r"\bissues?\s*#?\d+", re.IGNORECASE)
WORD = "iss" + "ue"
MAX_DOCSTRING_LINES = 15
#: Files of the package that are not text.
BINARY = frozenset({".png", ".jpg", ".ico", ".woff", ".woff2", ".pyc"})


def package_dirs() -> list[Path]:
    """``stormwatch/`` and every source folder linked into it (data folders included)."""
    root = REPO / "stormwatch"
    return [root, *sorted(p.resolve() for p in root.iterdir() if p.is_symlink() and p.is_dir())]


def _files(folder: Path) -> Iterator[Path]:
    """The text files under ``folder``, not following links (``stormwatch/``'s links are walked apart)."""
    for parent, dirs, names in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(names):
            path = Path(parent) / name
            if not path.is_symlink() and path.suffix not in BINARY:
                yield path


def source_files() -> list[Path]:
    """Every text file of the package and every Python file of tests/ (not tests/data)."""
    files = [f for d in package_dirs() for f in _files(d)]
    return files + sorted(p for p in (REPO / "tests").rglob("*.py") if "data" not in p.relative_to(REPO).parts)


def issue_references(paths: list[Path], root: Path = REPO) -> list[str]:
    """``file:line: text`` of each line naming an issue."""
    found = []
    for path in paths:
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if ISSUE_REF.search(line):
                found.append(f"{path.relative_to(root)}:{number}: {line.strip()}")
    return found


def _first_statement(text: str) -> str:
    """``text`` up to the end of its first statement, found by tokens: parsing it alone is a
    fraction of parsing the whole file (the suite's source is read on every run of the fast lane)."""
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.NEWLINE:
            head = "".join(text.splitlines(keepends=True)[:tok.end[0]])
            try:
                ast.parse(head)
            except SyntaxError:  # a compound statement: its header alone is no statement
                return text
            return head
    return text


def long_docstrings(paths: list[Path], root: Path = REPO) -> list[str]:
    """``file: N lines`` of each module docstring longer than :data:`MAX_DOCSTRING_LINES`."""
    found = []
    for path in paths:
        if path.suffix != ".py":
            continue
        tree = ast.parse(_first_statement(path.read_text(encoding="utf-8")))
        first = tree.body[0] if tree.body else None
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
            lines = (first.end_lineno or first.lineno) - first.lineno + 1
            if lines > MAX_DOCSTRING_LINES:
                found.append(f"{path.relative_to(root)}: {lines} lines")
    return found


def test_no_issue_references_in_the_package_or_the_tests() -> None:
    found = issue_references(source_files())
    assert not found, "name the behaviour or the docs section instead:\n" + "\n".join(found)


def test_no_module_docstring_over_15_lines() -> None:
    found = long_docstrings(source_files())
    assert not found, "a module docstring says what the module is for; the design goes to docs/:\n" + \
        "\n".join(found)


def test_the_checks_find_a_planted_reference_and_a_planted_essay(tmp_path: Path) -> None:
    essay = tmp_path / "essay.py"
    essay.write_text('"""What it is for.\n' + "and its design\n" * 15 + f'"""\n\n# as {WORD} 12 item 3 asked\n')
    short = tmp_path / "short.py"
    short.write_text('"""What it is for.\n' + "line\n" * 13 + f'"""\n\n# an {WORD} with port 80: said once\n')
    assert issue_references([essay, short], tmp_path) == [f"essay.py:19: # as {WORD} 12 item 3 asked"]
    assert long_docstrings([essay, short], tmp_path) == ["essay.py: 17 lines"]
    for text in (f"({WORD.title()} 11 item 7)", f"{WORD} #7", f"{WORD}s 3 and 5"):
        assert ISSUE_REF.search(text), text
    assert (REPO / "alerts").resolve() in package_dirs()
