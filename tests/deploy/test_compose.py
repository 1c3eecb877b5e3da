"""docker-compose.yml: valid for Debian's docker-compose 1.29, secrets only from the env file,
every service with a restart policy and a healthcheck, every mounted path present."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO

pytestmark = pytest.mark.slow  # runs docker-compose

COMPOSE = REPO / "docker-compose.yml"
ENV_EXAMPLE = REPO / ".env.example"


def _compose_binary() -> str:
    binary = shutil.which("docker-compose")
    if binary is None:
        msg = "docker-compose not installed (Debian: apt-get install docker-compose)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but {msg}")
        pytest.skip(msg)
    return binary


def _config(env_file: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    # Variables of the test process must not stand in for the env file's.
    env = {k: v for k, v in os.environ.items()
           if not re.match(r"^(MQTT_|INFLUXDB_|GRAFANA_|SIM_|SMTP_|MAIL_FROM|WEB_)", k)}
    return subprocess.run(
        [_compose_binary(), "--project-directory", str(REPO), "-f", str(COMPOSE), "--env-file", str(env_file),
         "config", "-q"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=False,
    )


def test_compose_config_is_valid(tmp_path: Path) -> None:
    result = _config(ENV_EXAMPLE, tmp_path)
    assert result.returncode == 0, result.stderr


def test_compose_refuses_missing_secrets(tmp_path: Path) -> None:
    env = tmp_path / "partial.env"
    env.write_text("\n".join(line for line in ENV_EXAMPLE.read_text().splitlines()
                             if not line.startswith("INFLUXDB_USER_PASSWORD=")) + "\n")
    result = _config(env, tmp_path)
    assert result.returncode != 0
    assert "INFLUXDB_USER_PASSWORD" in result.stderr


def test_readme_step_copy_env_then_config_passes(tmp_path: Path) -> None:
    """The README's steps as a user runs them: `cp .env.example .env`, then `docker-compose config`
    in the project directory (no --env-file): it passes; without the .env it fails naming a secret."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "cp .env.example .env" in readme
    project = tmp_path / "stack"
    project.mkdir()
    shutil.copy(COMPOSE, project / "docker-compose.yml")
    env = {k: v for k, v in os.environ.items()
           if not re.match(r"^(MQTT_|INFLUXDB_|GRAFANA_|SIM_|SMTP_|MAIL_FROM|WEB_)", k)}

    def config() -> subprocess.CompletedProcess[str]:
        return subprocess.run([_compose_binary(), "config", "-q"], cwd=project, env=env, capture_output=True,
                              text=True, timeout=60, check=False)

    before = config()
    assert before.returncode != 0 and "in .env" in before.stderr
    shutil.copy(ENV_EXAMPLE, project / ".env")
    after = config()
    assert after.returncode == 0, after.stderr


def test_the_stack_runs_the_store_ci_runs_on_a_real_server() -> None:
    """Every service's store is an influx1:// URL on the stack's InfluxDB 1.8: the store the
    conformance suite writes to and reads from on a real InfluxDB 1.x (tests/stores)."""
    services = _services()
    assert services["influxdb"]["image"].startswith("influxdb:1.")
    stores = {name: svc["environment"]["STORMWATCH_STORE"] for name, svc in services.items()
              if "STORMWATCH_STORE" in svc.get("environment", {})}
    assert set(stores) == {"ingest", "alerts", "web"}
    assert all(url.startswith("influx1://") and "@influxdb:8086/" in url for url in stores.values()), stores
    conformance = (REPO / "tests" / "stores" / "test_conformance.py").read_text(encoding="utf-8")
    assert '"influx1": Sink(influx1_subject, (pytest.mark.influxdb,))' in conformance


def _services() -> dict[str, dict]:
    return yaml.safe_load(COMPOSE.read_text())["services"]


def test_every_service_restarts_and_has_a_healthcheck() -> None:
    services = _services()
    assert set(services) == {"mosquitto", "influxdb", "grafana", "ingest", "alerts", "web", "site"}
    for name, svc in services.items():
        assert svc.get("restart") in ("unless-stopped", "on-failure", "always"), name
        assert svc.get("healthcheck", {}).get("test"), name


def test_data_lives_in_named_volumes_and_mounts_exist() -> None:
    doc = yaml.safe_load(COMPOSE.read_text())
    named = set(doc["volumes"])
    for name, svc in doc["services"].items():
        for vol in svc.get("volumes", []):
            source = vol.split(":", 1)[0]
            if source.startswith("."):
                assert (REPO / source).exists(), f"{name}: {source} missing"
            else:
                assert source in named, f"{name}: {source} is not a named volume"


def test_every_variable_is_in_env_example() -> None:
    used = set(re.findall(r"\$\{([A-Z0-9_]+)", COMPOSE.read_text()))
    defined = {line.split("=", 1)[0] for line in ENV_EXAMPLE.read_text().splitlines()
               if line and not line.startswith("#")}
    assert used <= defined, used - defined


def test_no_secret_in_committed_files() -> None:
    """Passwords and tokens appear only as ${VARIABLES} in the compose file and provisioning."""
    secrets = [line.split("=", 1)[1] for line in ENV_EXAMPLE.read_text().splitlines()
               if "=" in line and not line.startswith("#") and "change-me" in line]
    assert secrets
    for path in [COMPOSE, *(REPO / "deploy").rglob("*")]:
        if path.is_file():
            text = path.read_text(errors="replace")
            assert not any(s in text for s in secrets), path
