"""The provider registry: the built-in providers by name, a one-line error for an unknown
one, and a provider added by an installed package's entry point with no change to kb."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest

from kb.errors import ConfigError
from kb.models.providers import BUILT_IN, ProviderSpec, choices, names, provider
from support.cli import run_kb
from support.configs import write_config


def test_the_built_in_providers_by_name() -> None:
    assert names()[:3] == ["ollama", "openai", "fake"] == list(BUILT_IN)
    ollama, openai, fake = (provider(name) for name in BUILT_IN)
    assert all(isinstance(spec, ProviderSpec) for spec in (ollama, openai, fake))
    assert (ollama.default_host, ollama.host_variable) == ("http://localhost:11434", "OLLAMA_HOST")
    assert ollama.host_url("gpu-box:11434") == "http://gpu-box:11434"
    assert ollama.missing_fix("m") == "ollama pull m"
    # An OpenAI-compatible server has no default address; the offline provider no server.
    assert openai.needs_host and not ollama.needs_host and not fake.needs_host
    assert openai.has_server and not fake.has_server
    assert choices(["ollama", "openai", "fake"]) == "ollama, openai or fake"
    assert choices(["ollama"]) == "ollama"


def test_an_unknown_provider_is_one_line_naming_the_known_ones() -> None:
    with pytest.raises(ConfigError) as caught:
        provider("gpt", key="config key 'llm.provider'")
    message = str(caught.value)
    assert message.startswith("config key 'llm.provider' must be one of ollama, openai, fake")
    assert "\n" not in message


# A package as pip leaves it: its module, and the metadata that declares its entry point.
PLUGIN = """
    from pathlib import Path
    import os

    from kb.llm.fake import FakeChat, FakeEmbedder
    from kb.models.providers import ProviderSpec


    class LoggedEmbedder(FakeEmbedder):
        def embed(self, texts):
            with Path(os.environ["ECHO_LOG"]).open("a") as log:
                log.write(f"{len(texts)}\\n")
            return super().embed(texts)


    PROVIDER = ProviderSpec(
        chat=lambda at: FakeChat(at.model),
        embedder=lambda at: LoggedEmbedder(at.model),
        served_models=lambda host, api_key, timeout: ["qwen2.5:1.5b"],
        default_host="http://echo.invalid:1",
        host_variable="ECHO_HOST",
    )
"""


@pytest.fixture
def plugin_env(tmp_path: Path, db_url: str) -> dict[str, str]:
    """The environment of a kb process that finds the `echo` provider installed."""
    site = tmp_path / "site"
    info = site / "kb_echo-0.1.dist-info"
    info.mkdir(parents=True)
    (site / "kb_echo.py").write_text(textwrap.dedent(PLUGIN), encoding="utf-8")
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: kb-echo\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[kb.providers]\necho = kb_echo:PROVIDER\n")
    path = os.pathsep.join(filter(None, (str(site), os.environ.get("PYTHONPATH"))))
    return {
        **os.environ,
        "PYTHONPATH": path,
        "KB_DATABASE_URL": db_url,
        "ECHO_LOG": str(tmp_path / "echo.log"),
        "COLUMNS": "200",
    }


def test_an_installed_package_adds_a_provider(
    plugin_env: dict[str, str], vault: Path, tmp_path: Path
) -> None:
    config = tmp_path / "kb.toml"
    env = {**plugin_env, "ECHO_HOST": "http://echo.example:7"}
    init = run_kb(config, env, "init", str(vault), "--yes", "--owner", "Ana", "--provider", "echo")
    assert init.returncode == 0, init.stderr
    # The server at the provider's own variable is asked, and its fixes are the defaults.
    assert "http://echo.example:7: missing nomic-embed-text" in init.stdout
    assert "the server does not list nomic-embed-text" in init.stdout
    assert 'provider = "echo"' in config.read_text()

    # KB_PROVIDER names it too; a search embeds its query with the package's embedder.
    write_config(config, vault, owner_name="Ana", personal=(), llm={"provider": "ollama"})
    env = {**plugin_env, "KB_PROVIDER": "echo"}
    assert run_kb(config, env, "index", "--wait").returncode == 0
    log = Path(env["ECHO_LOG"])
    indexed = log.read_text().splitlines()
    found = run_kb(config, env, "query", "miso ramen", "--json")
    assert found.returncode == 0 and json.loads(found.stdout), found.stderr[-500:]
    assert log.read_text().splitlines() == [*indexed, "1"]

    unknown = run_kb(config, {**plugin_env, "KB_PROVIDER": "gpt"}, "status")
    assert unknown.returncode != 0
    assert "must be one of ollama, openai, fake, echo" in unknown.stderr
