"""The files that run `kb daemon` for real: compose.yml, the systemd unit, the launchd plist.

None of them can be started here; these checks hold them to what the docs promise.
"""

from __future__ import annotations

import configparser
import plistlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kb.config import load_config

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"


def test_compose_runs_the_daemon_on_the_configured_models() -> None:
    compose = yaml.safe_load((ROOT / "compose.yml").read_text())
    services = compose["services"]
    assert set(services) == {
        "postgres",
        "ollama",
        "ollama-models",
        "kb",
        "kb-worker",
        "kb-mcp",
        "kb-web",
    }
    assert services["postgres"]["image"].startswith("pgvector/pgvector:")
    kb = services["kb"]
    assert kb["command"] == ["daemon"] and "entrypoint" not in kb
    assert kb["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert kb["depends_on"]["ollama-models"]["condition"] == "service_completed_successfully"
    # One place names the models: the pull and kb read the same variables.
    pull = " ".join(services["ollama-models"]["entrypoint"])
    for name in ("KB_CHAT_MODEL", "KB_EMBED_MODEL"):
        assert f'"$${name}"' in pull
        assert kb["environment"][name] == services["ollama-models"]["environment"][name]
    assert "./deploy/kb.toml:/config/kb.toml:ro" in kb["volumes"]
    assert any(v.endswith(":/vault:ro") for v in kb["volumes"])


def test_compose_workers_scale_out_without_the_vault() -> None:
    services = yaml.safe_load((ROOT / "compose.yml").read_text())["services"]
    worker, kb = services["kb-worker"], services["kb"]
    assert worker["command"] == ["worker"] and "entrypoint" not in worker
    # `--scale kb-worker=N` needs no fixed name or published port.
    assert "container_name" not in worker and "ports" not in worker
    assert worker["volumes"] == ["./deploy/kb.toml:/config/kb.toml:ro"]
    assert worker["environment"] == {
        k: v for k, v in kb["environment"].items() if k != "KB_DAEMON_POLLING"
    }
    assert worker["depends_on"] == kb["depends_on"]


def test_compose_serves_mcp_over_http_only_on_request_and_with_a_token() -> None:
    services = yaml.safe_load((ROOT / "compose.yml").read_text())["services"]
    mcp, kb = services["kb-mcp"], services["kb"]
    assert mcp["profiles"] == ["mcp"]
    assert mcp["command"][:2] == ["mcp", "--http"]
    # Published on the host's loopback only; kb refuses 0.0.0.0 without the token.
    assert all(p.startswith("127.0.0.1:") for p in mcp["ports"])
    assert "KB_MCP_TOKEN" in mcp["environment"]
    assert mcp["volumes"] == kb["volumes"]
    assert {k: v for k, v in mcp["environment"].items() if k != "KB_MCP_TOKEN"} == {
        k: v for k, v in kb["environment"].items() if k != "KB_DAEMON_POLLING"
    }


def test_compose_serves_the_web_page_only_on_request_and_with_a_token() -> None:
    services = yaml.safe_load((ROOT / "compose.yml").read_text())["services"]
    web, kb = services["kb-web"], services["kb"]
    assert web["profiles"] == ["web"]
    assert web["command"][0] == "serve" and "0.0.0.0" in web["command"]
    assert all(p.startswith("127.0.0.1:") for p in web["ports"])
    assert "KB_SERVE_TOKEN" in web["environment"]
    assert web["volumes"] == kb["volumes"]


def test_compose_config_is_valid() -> None:
    config = load_config(DEPLOY / "kb.toml", env={"KB_CHAT_MODEL": "m1", "KB_EMBED_MODEL": "m2"})
    assert [str(v.path) for v in config.vaults] == ["/vault"]
    assert (config.llm.chat_model, config.llm.embed_model) == ("m1", "m2")


def test_systemd_user_unit() -> None:
    unit = configparser.ConfigParser(interpolation=None, strict=False)
    unit.optionxform = str  # type: ignore[assignment,method-assign]
    unit.read(DEPLOY / "kb.service")
    assert unit["Service"]["ExecStart"] == "%h/.local/bin/kb daemon"
    assert unit["Service"]["KillSignal"] == "SIGTERM"
    assert unit["Install"]["WantedBy"] == "default.target"


def test_systemd_worker_unit_is_a_template() -> None:
    unit = configparser.ConfigParser(interpolation=None, strict=False)
    unit.optionxform = str  # type: ignore[assignment,method-assign]
    unit.read(DEPLOY / "kb-worker@.service")
    assert unit["Service"]["ExecStart"] == "%h/.local/bin/kb worker"
    assert unit["Service"]["KillSignal"] == "SIGTERM"
    assert unit["Install"]["WantedBy"] == "default.target"


@pytest.mark.parametrize(
    ("name", "command"), [("kb.service", "daemon"), ("kb-worker@.service", "worker")]
)
def test_systemd_unit_verifies(tmp_path: Path, name: str, command: str) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed")
    text = (DEPLOY / name).read_text()
    # The unit's binary path is a user's; verify checks that it exists, so point it at ours.
    copy = tmp_path / name.replace("@", "@1")
    copy.write_text(
        text.replace(f"%h/.local/bin/kb {command}", f"{sys.executable} -m kb {command}")
    )
    result = subprocess.run(
        [analyze, "verify", str(copy)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr


def test_launchd_plist() -> None:
    with (DEPLOY / "kb.daemon.plist").open("rb") as f:
        plist = plistlib.load(f)
    assert plist["Label"] == "kb.daemon"
    program = plist["ProgramArguments"]
    assert program[:2] == ["/bin/sh", "-c"] and '"$HOME/.local/bin/kb" daemon' in program[2]
    assert plist["RunAtLoad"] is True
    assert plist["KeepAlive"] == {"SuccessfulExit": False}
    assert plist["ExitTimeOut"] >= 15
