"""The ``stormwatch`` command imports a command's module only when that command runs (issue 15:
``stormwatch report`` paid ~1 s of CPU importing the gateway, simulators, dashboards, web desk ...)."""

from __future__ import annotations

import importlib
import subprocess
import sys

import typer
import typer.main
from typer.testing import CliRunner

from stormwatch.app.cli import COMMANDS, app


def test_each_module_registers_exactly_the_commands_the_table_names() -> None:
    for module_name in dict.fromkeys(COMMANDS.values()):
        sub = typer.Typer()
        importlib.import_module(module_name).register(sub)
        registered = set(typer.main.get_group(sub).commands)
        assert registered == {n for n, m in COMMANDS.items() if m == module_name}, module_name


def test_the_root_help_lists_every_command_with_its_one_line_help() -> None:
    result = CliRunner().invoke(app, ["--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    rows = [line.strip("│ ").split(None, 1) for line in result.output.splitlines() if line.startswith("│ ")]
    listed = {row[0]: row[1] if len(row) > 1 else "" for row in rows if row[0] in COMMANDS}
    assert list(listed) == list(COMMANDS)
    assert listed["report"].startswith("Write the site log book of a period")
    assert listed["gateway"].startswith("Poll the site's devices and publish their readings to MQTT")


#: What running ``stormwatch report --help`` must not import: the other commands' modules and the
#: libraries only they use.
OTHERS = ("stormwatch.gateway.cli", "stormwatch.ingest.cli", "stormwatch.simulators.cli",
          "stormwatch.dashboards.cli", "stormwatch.importers.cli", "stormwatch.app.demo",
          "stormwatch.web.cli", "stormwatch.alerts.cli", "holidays", "starlette", "pymodbus", "paho")


def test_running_one_command_imports_only_its_module() -> None:
    code = ("import sys\nfrom stormwatch.app.cli import main\nsys.argv = ['stormwatch', 'report', '--help']\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            f"print(sorted(m for m in {OTHERS!r} if m in sys.modules))\n"
            "print('stormwatch.report.cli' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    *_, imported, report = done.stdout.splitlines()
    assert imported == "[]" and report == "True", done.stdout


def test_a_mistyped_command_is_one_line_with_a_suggestion() -> None:
    result = CliRunner().invoke(app, ["reprt"])
    assert result.exit_code == 2
    assert "No such command 'reprt'. Did you mean 'report'?" in " ".join(result.output.split())
