"""The LLM providers kb can talk to, by name: each a `ProviderSpec` in a module of its own.

A provider's module is imported only when its name is used, so a command never loads a
client library it does not speak. The built-in providers are one line each in `BUILT_IN`;
an installed package adds one with no change to kb, through an entry point of the group
`kb.providers` whose value names its spec:

    [project.entry-points."kb.providers"]
    lmstudio = "kb_lmstudio:PROVIDER"

A built-in name cannot be taken over by a package.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kb.errors import ConfigError, first_line
from kb.models.base import ChatModel, TextEmbedder

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

# Name -> the module whose `PROVIDER` is its spec.
BUILT_IN: dict[str, str] = {
    "ollama": "kb.llm.ollama",
    "openai": "kb.llm.openai",
    "fake": "kb.llm.fake",
}
ENTRY_POINT_GROUP = "kb.providers"


@dataclass(frozen=True)
class Endpoint:
    """One model on one server, and how patiently to ask it: what a provider makes a chat
    model or an embedder from."""

    host: str
    model: str
    api_key: str
    timeout: float
    retries: int
    timeout_per_token: float = 0.0  # more seconds per output token a chat answer may have
    section: str = "llm"  # the config table the model was set in, named by errors as the fix


def _as_given(host: str) -> str:
    return host


def _start_the_server(host: str, wanted: Sequence[str]) -> tuple[str, ...]:
    return (f"start the server at {host}, or set [llm] host (and api_key) to one that runs",)


def _load_it_there(model: str) -> str:
    return f"the server does not list {model}: load it there, or name one it has in [llm]"


@dataclass(frozen=True)
class ProviderSpec:
    """What differs from one provider to the next."""

    chat: Callable[[Endpoint], ChatModel]
    embedder: Callable[[Endpoint], TextEmbedder]
    # The models the server at a host has (host, api_key, timeout; LLMError when it cannot be
    # reached): what `kb init` checks the configured ones against. None for a provider with
    # no model server, which has every model and needs no host.
    served_models: Callable[[str, str, float], list[str]] | None
    # The host when the config names none; "" for a provider with a server means the config
    # must name one.
    default_host: str = ""
    # The environment variable that overrides [llm]'s host, as the provider's own tools read it.
    host_variable: str = ""
    # A host as written (in that variable, or [ask] host) made a URL.
    host_url: Callable[[str], str] = _as_given
    # The host `kb init` writes for the user to edit, when the provider has no default.
    example_host: str = ""
    # What `kb init` says when the server does not answer (host, the models wanted) and for
    # each model it lacks.
    down_fixes: Callable[[str, Sequence[str]], tuple[str, ...]] = _start_the_server
    missing_fix: Callable[[str], str] = _load_it_there
    # Said by `kb init` beside "no model server" for a provider without one.
    note: str = ""

    @property
    def has_server(self) -> bool:
        return self.served_models is not None

    @property
    def needs_host(self) -> bool:
        """Whether the config must name the server: it has one, and no default."""
        return self.has_server and not self.default_host


def provider(name: str, *, key: str = "provider") -> ProviderSpec:
    """The spec of the provider `name`; a one-line ConfigError when there is none, which
    says that `key` (what was set to the name) must be one of the known names."""
    spec = _spec(name)
    if spec is None:
        raise ConfigError(f"{key} must be one of {', '.join(names())}")
    return spec


def names() -> list[str]:
    """Every provider's name: the built-in ones, then the installed ones."""
    return [*BUILT_IN, *sorted(_installed().keys() - BUILT_IN.keys())]


def choices(known: Sequence[str]) -> str:
    """Names as a sentence reads them: "ollama, openai or fake"."""
    return " or ".join(filter(None, (", ".join(known[:-1]), known[-1])))


@functools.cache
def _spec(name: str) -> ProviderSpec | None:
    if name in BUILT_IN:
        built_in: ProviderSpec = importlib.import_module(BUILT_IN[name]).PROVIDER
        return built_in
    point = _installed().get(name)
    if point is None:
        return None
    try:
        spec = point.load()
    except Exception as exc:  # a package's own import error, whatever it is
        raise ConfigError(
            f"provider '{name}' cannot be loaded from {point.value}: {first_line(exc)}"
        ) from None
    if not isinstance(spec, ProviderSpec):
        raise ConfigError(f"provider '{name}' ({point.value}) is not a ProviderSpec")
    return spec


@functools.cache
def _installed() -> dict[str, EntryPoint]:
    # Read only for a name that is not built in: the scan reads every installed package's
    # metadata.
    from importlib.metadata import entry_points

    return {point.name: point for point in entry_points(group=ENTRY_POINT_GROUP)}
