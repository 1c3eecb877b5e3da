"""What a user installs must run: the wheel holds one namespace and every file read at run time,
and the container image installs that wheel.

The full proof (the wheel installed into a fresh virtual environment outside the checkout, then
``stormwatch --version``, ``gateway --check`` and ``demo --json``) runs in ``.ci/run``; these tests
check the artifact's contents and the Dockerfile's paths quickly on every run.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
import yaml

from stormwatch.app.cli import app
from tests.conftest import REPO

#: Top-level source folders mapped into the stormwatch namespace (the product's design keeps them
#: at the top level of the repository).
LINKED = ("gateway", "ingest", "alerts", "simulators", "importers", "dashboards", "device_profiles", "examples",
          "web", "report", "stores", "enforcement")


def test_every_source_folder_is_linked_into_the_namespace() -> None:
    for name in LINKED:
        link = REPO / "stormwatch" / name
        assert link.is_symlink(), f"stormwatch/{name} must link to ../{name}"
        assert link.resolve() == (REPO / name).resolve()
    # every top-level folder holding Python belongs to the namespace, or to the repo's tooling
    tooling = {"tests", "benchmarks", "stormwatch", "docs", "deploy", ".ci", ".venv", "build", "dist"}
    code_dirs = {p.parent.name for p in REPO.glob("*/__init__.py")} - tooling
    assert code_dirs <= set(LINKED), f"not in the stormwatch namespace: {code_dirs - set(LINKED)}"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out),
                    str(REPO)], check=True, capture_output=True, timeout=300)
    (whl,) = out.glob("stormwatch-*.whl")
    return whl


@pytest.mark.slow  # builds the wheel (pip)
def test_wheel_installs_one_namespace_and_every_runtime_file(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/", 1)[0] for n in names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"stormwatch"}
    for name in LINKED:
        source = REPO / name
        expected = {f"stormwatch/{name}/{p.relative_to(source).as_posix()}"
                    for p in source.rglob("*") if p.is_file() and "__pycache__" not in p.parts
                    and p.suffix in (".py", ".yaml", ".json", ".html", ".css", ".js")}
        missing = expected - set(names)
        assert not missing, f"not in the wheel: {sorted(missing)}"
    # the data a run reads, by kind (counted from the repository, not typed in)
    for folder, pattern in (("device_profiles", "*.yaml"), ("alerts/packs", "*.yaml"),
                            ("simulators/scenarios", "*.yaml"), ("dashboards/json", "*.json"),
                            ("report/templates", "*.html"), ("report/templates", "*.css"),
                            ("enforcement/templates", "*.html"), ("enforcement/templates", "*.css")):
        files = sorted(p.name for p in (REPO / folder).glob(pattern))
        assert files, folder
        assert all(f"stormwatch/{folder}/{f}" in names for f in files)
    assert "stormwatch/examples/site.yaml" in names
    for folder, pattern in (("web/templates", "*.html"), ("web/static", "*"), ("web/ordinances", "*.yaml")):
        files = sorted(p.name for p in (REPO / folder).glob(pattern))
        assert files, folder
        assert all(f"stormwatch/{folder}/{f}" in names for f in files), folder
    assert "stormwatch/py.typed" in names
    entry_points = zipfile.ZipFile(wheel).read(
        next(n for n in names if n.endswith(".dist-info/entry_points.txt"))).decode()
    assert re.search(r"^stormwatch = stormwatch\.app\.entry:main$", entry_points, re.M)


def _dockerfile_copies() -> list[tuple[str | None, list[str], str]]:
    """(from-stage or None, sources, destination) of every COPY instruction."""
    copies = []
    for line in (REPO / "Dockerfile").read_text().splitlines():
        if not line.startswith("COPY "):
            continue
        words = shlex.split(line)[1:]
        stage = None
        if words[0].startswith("--from="):
            stage = words.pop(0).split("=", 1)[1]
        copies.append((stage, words[:-1], words[-1]))
    return copies


def test_dockerfile_copies_paths_that_exist_and_everything_the_wheel_needs() -> None:
    copies = _dockerfile_copies()
    assert copies
    copied = set()
    for stage, sources, _ in copies:
        if stage is not None:
            continue
        for src in sources:
            assert (REPO / src).exists(), f"Dockerfile copies {src}, which is not in the repository"
            copied.add(src.rstrip("/"))
    # the build stage has every folder the wheel is made of, and what setuptools reads
    assert {"pyproject.toml", "README.md", "stormwatch", *LINKED} <= copied
    ignored = (REPO / ".dockerignore").read_text().split()
    assert not set(ignored) & {"stormwatch", *LINKED}, "the .dockerignore hides a source folder"


def test_dockerfile_installs_the_wheel_not_the_checkout() -> None:
    text = (REPO / "Dockerfile").read_text()
    assert "pip wheel" in text and re.search(r"pip install [^\n]*stormwatch-\*\.whl", text)
    assert " -e " not in text and "--editable" not in text
    assert re.search(r"^USER stormwatch$", text, re.M)  # never root at run time


def _command_names(typer_app: object) -> set[str]:
    import typer.main

    group = typer.main.get_group(typer_app)  # type: ignore[arg-type]
    return set(group.commands)


def test_commands_the_image_and_compose_run_exist_in_the_installed_package() -> None:
    text = (REPO / "Dockerfile").read_text()
    entry = re.search(r'^ENTRYPOINT \["(\w+)"\]', text, re.M)
    assert entry and entry.group(1) == "stormwatch"
    commands = _command_names(app)
    services = yaml.safe_load((REPO / "docker-compose.yml").read_text())["services"]
    for name, svc in services.items():
        if svc.get("image", "").startswith("stormwatch") or "build" in svc:
            if svc.get("entrypoint"):
                (script,) = svc["entrypoint"]
                copied = {dest for _, _, dest in _dockerfile_copies()}
                assert f"/usr/local/bin/{script}" in copied, name
                continue
            assert svc["command"][0] in commands, f"compose service {name} runs an unknown command"
            if "--site" in svc["command"]:
                site = svc["command"][svc["command"].index("--site") + 1]
                assert site in {dest for _, _, dest in _dockerfile_copies()}, f"{name}: {site} is not in the image"
    script = (REPO / "deploy" / "site" / "simulated-site.sh").read_text()
    for used in re.findall(r"^\s*stormwatch (\w[\w-]*)", script, re.M):
        assert used in commands, f"simulated-site.sh runs unknown command {used}"


def _source_text() -> str:
    """Every Python source of the stormwatch namespace (its top-level packages are symlinked into it)."""
    root = REPO / "stormwatch"
    dirs = [root, *(d.resolve() for d in root.iterdir() if d.is_symlink() and d.is_dir())]
    return "\n".join(f.read_text(encoding="utf-8") for d in dirs for f in d.rglob("*.py"))


def test_compose_services_use_real_options_and_variables() -> None:
    """Every --option a stormwatch service of docker-compose.yml passes is one its command has, and
    every STORMWATCH_* variable it sets is read by the package (a renamed option or variable would
    otherwise be ignored or refused only when the stack starts)."""
    from typer.testing import CliRunner

    services = yaml.safe_load((REPO / "docker-compose.yml").read_text())["services"]
    source = _source_text()
    checked = set()
    for name, svc in services.items():
        if "build" not in svc or svc.get("entrypoint"):
            continue
        command = svc["command"]
        help_text = CliRunner().invoke(app, [command[0], "--help"], terminal_width=300).output
        for option in (a for a in command if a.startswith("--")):
            assert option in help_text, f"{name}: `stormwatch {command[0]}` has no {option}"
        for var in svc.get("environment", {}):
            if var.startswith("STORMWATCH_"):
                assert f'"{var}"' in source, f"{name}: {var} is read nowhere in the package"
        checked.add(name)
    assert {"ingest", "alerts", "web"} <= checked
    web = services["web"]
    assert web["command"][:1] == ["web"] and "0.0.0.0" in web["command"]  # reachable through the port mapping
    assert "alerts-state:/var/lib/stormwatch" in web["volumes"] and web["command"][
        web["command"].index("--state-dir") + 1] == "/var/lib/stormwatch"  # the alert engine's work-order book
    assert web["environment"]["STORMWATCH_STORE"] == services["alerts"]["environment"]["STORMWATCH_STORE"]
    # mail settings: the password only from the environment (never in the command or the URL variable)
    assert set(web["environment"]) >= {"STORMWATCH_SMTP", "STORMWATCH_SMTP_PASSWORD", "STORMWATCH_MAIL_FROM"}
    assert not any("PASSWORD" in a for a in web["command"])


def test_pyproject_mypy_gate_covers_the_contract_and_the_core() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["mypy"]
    assert config["strict"] is True
    assert config["packages"] == ["stormwatch"]  # every module of the namespace, strict
