"""One vocabulary (issue 12 item 5): every option of every command is in the one table of names
(stormwatch/runtime/cliutil.py OPTIONS) with its metavar, has help text, and no option shows a type name or
a Python repr as its metavar; older names are hidden aliases that still parse; `--help` works for
every command and `stormwatch --version` prints the version."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
import typer.main
from typer.testing import CliRunner

from stormwatch import __version__
from stormwatch.app.cli import app
from stormwatch.runtime.cliutil import ALIASES, OPTIONS, rewrite_aliases
from tests.conftest import REPO

#: What a metavar may look like: words (FILE, URL, NAME=QUANTITY[:UNIT], NAME|FILE, dry|gap, WORD...).
METAVAR = re.compile(r"^[A-Za-z][A-Za-z0-9_]*([=:|]?\[?:?[A-Za-z0-9_]+\]?)*(\.\.\.)?$")


def commands() -> Iterator[tuple[str, Any]]:
    """``(path, click command)`` of every leaf command, e.g. ``("workorders list", cmd)``."""
    root = typer.main.get_command(app)

    def walk(cmd: Any, path: list[str]) -> Iterator[tuple[str, Any]]:
        subs = getattr(cmd, "commands", None)
        if subs:
            for name, sub in subs.items():
                yield from walk(sub, [*path, name])
        else:
            yield " ".join(path), cmd

    yield from walk(root, [])


ALL = sorted(commands(), key=lambda c: c[0])


def groups() -> Iterator[tuple[str, Any]]:
    """``(path, click group)`` of the ``stormwatch`` command itself (path ``""``) and every group
    of commands (``workorders``, ``dashboards`` ...)."""
    root = typer.main.get_command(app)

    def walk(cmd: Any, path: list[str]) -> Iterator[tuple[str, Any]]:
        subs = getattr(cmd, "commands", None)
        if subs:
            yield " ".join(path), cmd
            for name, sub in subs.items():
                yield from walk(sub, [*path, name])

    yield from walk(root, [])


GROUPS = sorted(groups(), key=lambda c: c[0])


def test_the_commands_are_all_found() -> None:
    names = {path for path, _ in ALL}
    assert {"demo", "gateway", "ingest", "alerts", "simulate", "import", "replay", "evaluate", "decode",
            "workorders list", "workorders show", "workorders ack", "workorders complete", "workorders ical",
            "dashboards build", "profiles list", "packs list", "example-site"} <= names


@pytest.mark.parametrize(("path", "cmd"), ALL, ids=[p for p, _ in ALL])
def test_every_option_is_in_the_one_table_with_help_and_a_word_metavar(path: str, cmd: Any) -> None:
    for param in cmd.params:
        names = [*param.opts, *param.secondary_opts]
        if param.param_type_name == "argument":
            assert param.help, f"{path}: argument {param.name} has no help"
            assert param.metavar and METAVAR.match(param.metavar) and param.metavar == param.metavar.upper(), \
                f"{path}: argument {param.name} metavar {param.metavar!r}"
            continue
        if getattr(param, "hidden", False):
            continue  # older names (documented in cliutil) and --state FILE, --influx, --database
        assert param.help, f"{path}: {names} has no help text"
        for name in names:
            assert name in OPTIONS, f"{path}: {name} is not in stormwatch.runtime.cliutil.OPTIONS (one name per thing)"
        entry = OPTIONS[names[0]]
        flag = getattr(param, "is_flag", False) or getattr(param, "count", False)
        if flag:
            assert not entry.metavars, f"{path}: {names[0]} is a flag here but takes a value elsewhere"
            continue
        assert param.metavar, f"{path}: {names[0]} shows no metavar (typer would print a type name)"
        assert METAVAR.match(param.metavar), f"{path}: {names[0]} metavar {param.metavar!r} is not a word"
        assert param.metavar in entry.metavars, \
            f"{path}: {names[0]} shows {param.metavar!r}; the table says {entry.metavars}"


@pytest.mark.parametrize(("path", "cmd"), ALL, ids=[p for p, _ in ALL])
def test_every_command_has_help_saying_what_the_user_gets(path: str, cmd: Any) -> None:
    result = CliRunner().invoke(app, [*path.split(), "--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    text = result.output
    assert cmd.help and len(cmd.help.split()) >= 6, f"{path}: one-line help at least"
    assert "<list" not in text and "{file}" not in text and "None" not in text.replace("Nones", "")
    assert "--verbose" in text and "--log-file" in text  # every command: quiet by default, -v for more
    assert "<bool>" not in text and "<int>" not in text and "<path>" not in text.lower()


def test_the_groups_are_all_found() -> None:
    assert {"", "workorders", "dashboards", "profiles", "packs", "readings", "station", "users"} <= \
        {path for path, _ in GROUPS}


@pytest.mark.parametrize(("path", "group"), GROUPS, ids=[p or "stormwatch" for p, _ in GROUPS])
def test_every_group_shows_its_options_by_words_and_its_commands(path: str, group: Any) -> None:
    """A group's --help (``stormwatch workorders --help``) shows no type names either, its options
    are in the one table, and it lists every command of the group with a line of help."""
    import click

    ctx = click.Context(group, info_name=path or "stormwatch")
    for param in group.get_params(ctx):
        if getattr(param, "hidden", False):
            continue
        for name in (*param.opts, *param.secondary_opts):
            assert name in OPTIONS, f"{path or 'stormwatch'}: {name} is not in stormwatch.runtime.cliutil.OPTIONS"
    result = CliRunner().invoke(app, [*path.split(), "--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    text = result.output
    assert "<bool>" not in text and "<int>" not in text and "<text>" not in text and "<path>" not in text.lower()
    assert "<list" not in text and "{file}" not in text
    assert group.help and len(group.help.split()) >= 4, f"{path}: the group says what it is for"
    for name, sub in group.commands.items():
        if not getattr(sub, "hidden", False):
            assert name in text, f"{path}: --help does not list {name}"


def test_older_option_names_are_hidden_aliases_that_still_parse() -> None:
    visible = {path: {n for p in cmd.params if not getattr(p, "hidden", False) for n in (*p.opts, *p.secondary_opts)}
               for path, cmd in ALL}
    for path, table in ALIASES.items():
        for old, new in table.items():
            assert old not in visible[path], f"{path}: {old} is still shown"
            assert new in visible[path], f"{path}: alias {old} -> {new}, but {new} is not an option"
    assert rewrite_aliases("demo", ["--rain-tip-mm=0.2", "--rain-tz", "UTC", "--", "--rain-tz"]) == \
        ["--tip-mm=0.2", "--tz", "UTC", "--", "--rain-tz"]
    # an old name reaches the new option: its value is checked under the new name
    result = CliRunner().invoke(app, ["replay", "x.csv", "--tips", "1e400"])
    assert result.exit_code == 2 and "No such option" not in result.output


def test_same_thing_same_name() -> None:
    """The names the issue found split are one each now (tip size, zone, store, state, output)."""
    shown = {n for _, cmd in ALL for p in cmd.params if not getattr(p, "hidden", False)
             for n in (*p.opts, *p.secondary_opts)}
    for gone in ("--rain-tip-mm", "--tips", "--tips-in", "--rain-tz", "--influx", "--database", "--workdir",
                 "--state", "--out", "--to", "--rain-from", "--rain-until"):
        assert gone not in shown, gone
    for one in ("--tip-mm", "--tz", "--store", "--state-dir", "--output", "--from", "--until"):
        assert one in shown, one


def test_version() -> None:
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output.strip() == f"stormwatch {__version__}"


def test_quiet_by_default_verbose_on_request_and_a_log_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A command that is not a service logs only warnings unless -v; --log-file gets the details."""
    from stormwatch import resources

    rain = tmp_path / "rain.csv"
    rain.write_text("time,rain\n2024-06-01T00:00:00Z,0.2\n2024-06-01T00:01:00Z,0.4\n", encoding="utf-8")
    args = ["replay", str(rain), "--tip-mm", "0.2"]
    quiet = CliRunner().invoke(app, args, catch_exceptions=False)
    assert quiet.exit_code == 0 and " INFO " not in quiet.output, quiet.output
    loud = CliRunner().invoke(app, [*args, "-v"], catch_exceptions=False)
    assert loud.exit_code == 0 and " INFO    stormwatch.importers.load: import " in loud.output, loud.output
    log_file = tmp_path / "replay.log"
    to_file = CliRunner().invoke(app, [*args, "--log-file", str(log_file)], catch_exceptions=False)
    assert to_file.exit_code == 0 and " INFO " not in to_file.output
    assert " INFO    stormwatch.importers.load: import " in log_file.read_text(encoding="utf-8")
    # a service logs INFO by default (its log is its output): `gateway --check` is the gateway command
    site = resources.example_site()
    checked = CliRunner().invoke(app, ["gateway", "--check", "--site", str(site)], catch_exceptions=False)
    assert checked.exit_code == 0 and checked.output.startswith("ok: site riverside-commons"), checked.output


def _examples(text: str) -> Iterator[str]:
    """Every ``stormwatch COMMAND ...`` example in ``text`` (README, docs, a command's --help), its
    backslash-continued lines joined (a --help example may go on on the next indented line)."""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        while line.rstrip().endswith("\\") and i + 1 < len(lines):
            i += 1
            line = line.rstrip()[:-1] + " " + lines[i].strip()
        for rest in re.split(r"(?:^|(?<=[ `$(|'\"]))stormwatch ", line)[1:]:
            yield "stormwatch " + rest.split("#")[0].split("`")[0]
        i += 1


def _visible_options() -> dict[str, set[str]]:
    root = {n for _, g in GROUPS if _ == "" for p in g.params for n in (*p.opts, *p.secondary_opts)}
    return {path: root | {n for p in cmd.params if not getattr(p, "hidden", False)
                          for n in (*p.opts, *p.secondary_opts)} for path, cmd in ALL}


def test_every_example_in_the_docs_and_the_help_uses_the_current_option_names() -> None:
    """An example a newcomer copies works: each ``stormwatch COMMAND --option`` in README.md,
    docs/*.md and every command's --help is an option that command shows -- never an older hidden
    name (``demo --workdir``, ``users add --site``) or another command's option."""

    repo = REPO
    visible = _visible_options()
    sources = {str(p.relative_to(repo)): p.read_text(encoding="utf-8")
               for p in [repo / "README.md", *sorted((repo / "docs").glob("*.md"))]}
    for path, cmd in ALL:
        sources[f"stormwatch {path} --help"] = cmd.help or ""
    wrong = []
    for where, text in sources.items():
        for example in _examples(text):
            words = example.split()[1:]
            names = [w for w in words if not w.startswith("-")]
            command = next((" ".join(names[:n]) for n in (2, 1) if " ".join(names[:n]) in visible), None)
            if command is None:
                continue
            for word in words:
                option = word.split("=")[0]
                if re.fullmatch(r"--?[a-z][a-z0-9-]*", option) and option not in visible[command]:
                    wrong.append(f"{where}: stormwatch {command} ... {option}")
    assert wrong == []
