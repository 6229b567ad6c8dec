"""Configuration: a TOML file, then environment overrides, checked key by key.

The file is found via `--config`, then `KB_CONFIG`, then the XDG config path
(`~/.config/kb/config.toml`). Every key is documented in config.example.toml.
"""

from __future__ import annotations

import functools
import itertools
import os
import re
import stat
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, get_args

import pathspec
from pathspec.patterns.gitignore.spec import GitIgnoreSpecPattern

from kb.dates import DEFAULT_DATE_KEYS, DateRules
from kb.errors import ConfigError
from kb.fusion import FUSION_METHODS, Fusion, default_fusion
from kb.locations import default_data_dir, find_config_file
from kb.names import composed
from kb.results import SEARCH_MODES, SearchMode

DEFAULT_OLLAMA_HOST = "http://localhost:11434"
ConflictMode = Literal["ignore", "index"]
CONFLICT_MODES: tuple[ConflictMode, ...] = get_args(ConflictMode)

# Conflict copies written by sync tools: Syncthing, Obsidian Sync, Dropbox.
CONFLICT_PATTERNS = (
    "*.sync-conflict-*",
    "* (Conflicted copy *)*",
    "* (*conflicted copy*)*",
)


@dataclass(frozen=True)
class VaultConfig:
    name: str
    path: Path
    personal: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    conflicts: ConflictMode = "ignore"
    # Whether the vault's .obsidian/ settings are followed (kb.vault.obsidian): its templates
    # folder and excluded files left out, its daily notes dated by their names.
    obsidian: bool = True
    dates: DateRules = field(default_factory=DateRules)

    @property
    def folder(self) -> str:
        """The vault's folder, links resolved: what a note's path must stay under, and how
        the index's rows remember the vault."""
        return os.path.realpath(self.path)

    def is_personal(self, rel_path: str) -> bool:
        return bool(self.personal) and _globs(self.personal).match(composed(rel_path))

    def is_ignored(self, rel_path: str, *, case_sensitive: bool = True) -> bool:
        """Whether a path is left out; `case_sensitive` False where the vault's file system
        takes "private/x.md" for Private/x.md (macOS and Windows by default), so that no
        spelling of an ignored path escapes its rule."""
        # Dot-folders and dot-files (.obsidian/, .trash/, .git/) are never notes.
        if any(part.startswith(".") for part in rel_path.split("/")):
            return True
        rel_path = composed(rel_path)
        if self.conflicts == "ignore" and _globs(CONFLICT_PATTERNS, case_sensitive).match(rel_path):
            return True
        return bool(self.ignore) and _globs(self.ignore, case_sensitive).match(rel_path)


@dataclass(frozen=True)
class _Globs:
    """Gitignore-style patterns that match a vault-relative path (as kb writes one: "/"
    between its parts, never a leading "/" or "./"): where no pattern negates another, a path
    is matched when any one does, so their expressions are searched as one (a sync asks
    about every note of the vault; pathspec tries them one by one)."""

    spec: pathspec.GitIgnoreSpec
    any_of: re.Pattern[str] | None

    def match(self, path: str) -> bool:
        if self.any_of is not None:
            return self.any_of.search(path) is not None
        return self.spec.match_file(path)


@functools.lru_cache(maxsize=64)
def _globs(patterns: tuple[str, ...], case_sensitive: bool = True) -> _Globs:
    # Cached: the daemon's watcher asks about every event's path.
    spec = _spec(patterns, case_sensitive)
    expressions = [
        p.regex.pattern
        for p in spec.patterns
        if isinstance(p, pathspec.RegexPattern) and p.regex is not None and p.include
    ]
    if not expressions or len(expressions) != len(spec.patterns):
        return _Globs(spec, None)  # a negation: pathspec's order of patterns decides
    # pathspec names a group in each expression (where a folder matched, which only decides
    # between a pattern and its negation): one name may not be given twice in one.
    alternatives = "|".join(f"(?:{e.replace('(?P<ps_d>', '(?:')})" for e in expressions)
    try:
        return _Globs(spec, re.compile(alternatives, 0 if case_sensitive else re.I))
    except re.error:
        return _Globs(spec, None)


def _spec(patterns: tuple[str, ...], case_sensitive: bool = True) -> pathspec.GitIgnoreSpec:
    # Composed, as the paths matched are (kb.names).
    spec = pathspec.GitIgnoreSpec.from_lines([composed(p) for p in patterns])
    if case_sensitive:
        return spec
    # The same expressions compiled to ignore case: folding the globs' text instead could
    # turn a valid range ("[Z-a]") into an invalid one.
    return pathspec.GitIgnoreSpec(
        [
            type(p)(re.compile(p.regex.pattern, re.I), p.include)
            for p in spec.patterns
            if isinstance(p, pathspec.RegexPattern) and p.regex is not None
        ]
    )


def escaped(name: str) -> str:
    """A name in a glob (gitignore style), matching only itself: brackets, stars, question
    marks and backslashes in it are only characters."""
    return GitIgnoreSpecPattern.escape(name)


def literal_glob(prefix: str) -> str:
    """The ignore glob of exactly the vault-relative paths that start with `prefix`,
    character for character, as Obsidian matches its folder settings: "Archive [2023]/" is
    that folder and what it holds, "Drafts" every path whose name begins so at the root."""
    glob = "/" + escaped(prefix)
    return glob if prefix.endswith("/") else glob + "*"


@dataclass(frozen=True)
class ChunkingConfig:
    max_chars: int = 1600


# What each chunk's embedded context holds: LLM summaries (the product), the note's title
# and header path only (no LLM at all), or nothing but the chunk.
SummaryMode = Literal["llm", "structure", "none"]
SUMMARY_MODES: tuple[SummaryMode, ...] = get_args(SummaryMode)
# Extra texts of a chunk, each embedded as a vector of its own (see
# kb.context.passage_texts): every paragraph in its writer's voice, or none.
PassageMode = Literal["paragraphs", "none"]
PASSAGE_MODES: tuple[PassageMode, ...] = get_args(PassageMode)
# What the chat model writes of each chunk, one item a line, each a passage of its own
# (kb.context.chunk_writes): the facts it holds (statements) and the questions it answers.
ChunkWrite = Literal["statements", "questions"]
CHUNK_WRITES: tuple[ChunkWrite, ...] = get_args(ChunkWrite)
# What the chat model writes at the "llm" level: file and chunk summaries (embedded with each
# chunk), the voice of each note outside the owner's folders (whose "I" its paragraph
# passages speak in; kb.context.voices), and each chunk's lines (ChunkWrite).
ModelWrite = Literal["summaries", "voices", ChunkWrite]
MODEL_WRITES: tuple[ModelWrite, ...] = get_args(ModelWrite)


@dataclass(frozen=True)
class ContextConfig:
    first_chunks: int = 2
    last_chunks: int = 2
    summary_max_tokens: int = 160
    rewrite_personal: bool = True
    summaries: SummaryMode = "llm"
    # Chunk summaries one call may write: a note of up to this many chunks is summarised,
    # whole and chunk by chunk, in one call. 1 asks for every summary alone.
    batch_chunks: int = 6
    passages: PassageMode = "paragraphs"
    writes: tuple[ModelWrite, ...] = ("voices", "questions")

    def asks(self, output: ModelWrite) -> bool:
        """Whether the chat model is asked for this output: only at the "llm" level."""
        return self.summaries == "llm" and output in self.writes

    def chunk_writes(self) -> tuple[ChunkWrite, ...]:
        """The lines the chat model is asked to write of each chunk, in CHUNK_WRITES order."""
        return tuple(w for w in CHUNK_WRITES if self.asks(w))

    def voiced_passages(self) -> bool:
        """Whether the index's passages say a writer's name where a note said "I": the
        paragraphs in their writer's voice, and the chunks' lines (statements, questions)."""
        return self.passages != "none" or bool(self.chunk_writes())

    def names_writers(self) -> bool:
        """Whether the model names the writer of each note outside the owner's folders: for
        the paragraphs that speak in the writer's voice, and for the chunks' lines, which
        name the writer."""
        voiced = self.passages != "none" and self.asks("voices")
        return voiced or bool(self.chunk_writes())


@dataclass(frozen=True)
class LLMConfig:
    provider: str = "ollama"  # a name kb.models.providers knows
    chat_host: str = DEFAULT_OLLAMA_HOST
    embed_host: str = DEFAULT_OLLAMA_HOST
    api_key: str = ""
    chat_model: str = "qwen2.5:1.5b"
    embed_model: str = "nomic-embed-text"
    context_window: int = 8192
    concurrency: int = 2
    timeout: float = 120.0
    timeout_per_token: float = 0.5  # more seconds per output token a chat answer may have
    retries: int = 3
    embed_batch: int = 32
    # Overrides of the embedding model's profile (kb.llm.profiles): None keeps the known one.
    embed_query_prefix: str | None = None
    embed_document_prefix: str | None = None
    embed_window: int | None = None


@dataclass(frozen=True)
class AskConfig:
    """The chat model that answers questions (`kb ask`, MCP `ask`, the page's ask), when it
    is not `[llm]`'s: a larger model, or one on another server, for answers alone. What is
    left empty is `[llm]`'s."""

    provider: str | None = None
    host: str = ""
    chat_model: str = ""
    api_key: str = ""
    context_window: int | None = None
    # Passages an answer is written from, best first, where the question does not say
    # (--top-k): fewer than a search lists, since a small model answers best from the few
    # best.
    passages: int = 3

    def own_model(self) -> bool:
        """Whether answers are written by a chat model of their own, not `[llm]`'s."""
        return bool(self.provider or self.host or self.chat_model or self.api_key)

    def llm(self, llm: LLMConfig) -> LLMConfig:
        """The `[llm]` settings with the chat model, its server and its window taken from here
        where set. A key is only sent to the server it was given for: `[llm]`'s key goes with
        `[llm]`'s server alone."""
        same_server = not self.host and (self.provider or llm.provider) == llm.provider
        return replace(
            llm,
            provider=self.provider or llm.provider,
            chat_host=self.host or llm.chat_host,
            chat_model=self.chat_model or llm.chat_model,
            api_key=self.api_key or (llm.api_key if same_server else ""),
            context_window=self.context_window or llm.context_window,
        )


# The most chunks one search returns: far more than anyone reads, and each list reads that
# deep, so a number past it only makes the database work (or overflow its integers).
MAX_TOP_K = 1000


# How a hybrid search orders the candidates of both lists: by the learned ranker
# (kb.search.ranker), or by fusion's score alone.
Ordering = Literal["learned", "fusion"]
ORDERINGS: tuple[Ordering, ...] = get_args(Ordering)


@dataclass(frozen=True)
class QueryConfig:
    top_k: int = 5
    owner_in_first_person: bool = True
    mode: SearchMode = "hybrid"
    # How hybrid mode joins the vector list and the text list (see kb.fusion).
    fusion: Fusion = field(default_factory=Fusion)
    ranker: Ordering = "learned"
    # A ranker file of one's own (bench/ranker.py --save); None: the one kb ships.
    ranker_file: Path | None = None
    # Re-ranking (by the re-ranker of [rerank]) unless a query says otherwise. The chat
    # model's bounds: how many of the best candidates it reads, and how much of each, bound
    # its cost (one short call per candidate, cached); rerank.candidates and rerank.chars,
    # when set, take their place.
    rerank: bool = False
    rerank_candidates: int = 10
    rerank_chars: int = 600


# Who re-ranks a search's best candidates (kb query --rerank, query.rerank): the chat model
# judging each one 0-10 (kb.search.rerank), or a cross-encoder (kb.search.crossencoder)
# behind a /rerank endpoint (kb.llm.rerank_server) or run here from an ONNX export
# (kb.llm.onnx_crossencoder).
RerankBackend = Literal["chat", "http", "onnx"]
RERANK_BACKENDS: tuple[RerankBackend, ...] = get_args(RerankBackend)
# The request a /rerank endpoint takes: Jina's and Cohere's `documents` (llama-server,
# Infinity, vLLM, hosted APIs) or text-embeddings-inference's own `texts`.
RerankStyle = Literal["jina", "tei"]
RERANK_STYLES: tuple[RerankStyle, ...] = get_args(RerankStyle)


# What a cross-encoder reads unless told: more candidates, and more of each, than the chat
# judge (query.rerank_candidates, query.rerank_chars), since it scores them all in one batch.
CROSS_ENCODER_CANDIDATES = 20
CROSS_ENCODER_CHARS = 1600


@dataclass(frozen=True)
class RerankConfig:
    backend: RerankBackend = "chat"
    # backend "http": the endpoint itself (http://localhost:8080/rerank), the model to name
    # in the request (servers that hold one take none), a key sent as a Bearer token.
    url: str = ""
    model: str = ""
    api_key: str = ""
    style: RerankStyle = "jina"
    timeout: float = 30.0
    # backend "onnx": the folder holding model.onnx and tokenizer.json.
    folder: Path | None = None
    # How many of the best candidates the re-ranker reads, and how much of each; None: the
    # backend's own bounds (see `bounds`).
    candidates: int | None = None
    chars: int | None = None

    def bounds(self, query: QueryConfig) -> tuple[int, int]:
        """The candidates the re-ranker reads and the characters of each: as set here, else
        the chat judge's `[query]` keys (as before this section), else a cross-encoder's."""
        if self.backend == "chat":
            defaults = (query.rerank_candidates, query.rerank_chars)
        else:
            defaults = (CROSS_ENCODER_CANDIDATES, CROSS_ENCODER_CHARS)
        return (self.candidates or defaults[0], self.chars or defaults[1])


@dataclass(frozen=True)
class DaemonConfig:
    debounce: float = 1.0
    max_delay: float = 15.0
    reconcile_interval: float = 1800.0
    reconcile_jitter: float = 0.1
    max_pending: int = 10_000
    heartbeat: float = 5.0
    shutdown_grace: float = 10.0
    polling: bool = False


# The most notes one worker enriches at once: each is a thread, and their model calls share
# llm.concurrency anyway, so more would only hold notes that other workers could take.
MAX_ENRICH_CONCURRENCY = 64


@dataclass(frozen=True)
class EnrichConfig:
    # Two speeds: a note is stored (searchable) as soon as it is read, with the context known
    # without a model, and its LLM context is written later by workers draining a queue.
    # False: the LLM context is written while indexing, before the note is stored.
    enabled: bool = True
    # Notes one worker (`kb worker`, the daemon, `kb index --wait`) enriches at once; each
    # note's model calls still share llm.concurrency.
    concurrency: int = 1
    # Whether `kb daemon` enriches too, or leaves it to `kb worker` processes.
    in_daemon: bool = True
    # Seconds a worker holds a note it claimed; renewed while it works, so only a worker
    # that died (or lost the database) lets it run out, and another worker takes the note.
    lease: float = 120.0


@dataclass(frozen=True)
class Config:
    owner_name: str
    vaults: tuple[VaultConfig, ...]
    database_url: str = ""
    data_dir: Path = field(default_factory=lambda: default_data_dir())
    chunking: ChunkingConfig = field(default_factory=ChunkingConfig)
    context: ContextConfig = field(default_factory=ContextConfig)
    llm: LLMConfig = field(default_factory=LLMConfig)
    ask: AskConfig = field(default_factory=AskConfig)
    query: QueryConfig = field(default_factory=QueryConfig)
    rerank: RerankConfig = field(default_factory=RerankConfig)
    daemon: DaemonConfig = field(default_factory=DaemonConfig)
    enrich: EnrichConfig = field(default_factory=EnrichConfig)
    source: Path | None = None
    # The environment variables besides KB_* this configuration was resolved with, and
    # their values ("" unset): the provider's own host variable (OLLAMA_HOST). A daemon
    # answers a `kb query` only for a launcher whose environment agrees on them.
    environment: tuple[tuple[str, str], ...] = ()

    @property
    def file(self) -> str | None:
        """The file this configuration was read from, links resolved (None: from no file):
        how the index records the configuration that synced a vault."""
        return os.path.realpath(self.source) if self.source else None

    def folders(self) -> dict[str, str]:
        """Each vault's folder (`VaultConfig.folder`) by its name."""
        return {v.name: v.folder for v in self.vaults}


@dataclass(frozen=True)
class Range:
    """The numbers a key takes: from `low` to `high`, either end excluded where it says so.
    Every bound is finite, so a value in range is too (no NaN, no infinity)."""

    low: float
    high: float
    above: bool = False  # `low` itself excluded
    below: bool = False  # `high` itself excluded

    def holds(self, value: float) -> bool:
        low_ok = value > self.low if self.above else value >= self.low
        high_ok = value < self.high if self.below else value <= self.high
        return low_ok and high_ok  # False for NaN, whose every comparison is

    def __str__(self) -> str:
        low = (
            f"above {_number_text(self.low)}"
            if self.above
            else f"at least {_number_text(self.low)}"
        )
        high = (
            f"below {_number_text(self.high)}"
            if self.below
            else f"at most {_number_text(self.high)}"
        )
        return f"{low} and {high}"


def _number_text(value: float) -> str:
    return str(int(value)) if value == int(value) else str(value)


# A year: past any debounce, timeout, lease or interval anyone means, and far inside what
# timers (threading.TIMEOUT_MAX) and PostgreSQL's intervals take.
YEAR = 365 * 24 * 3600.0
SECONDS = Range(0, YEAR, above=True)
# Counts of things (chunks, tokens, characters, notes): anything a machine holds, and inside
# PostgreSQL's integers.
COUNT = Range(1, 1_000_000_000)
SHARE = Range(0, 1)
# A model's window, an answer's length: past any model there is.
TOKENS = Range(1, 100_000_000)
# The chunks of a note's start and end a summary reads.
CHUNKS = Range(0, 1000)
# Each retry waits up to 20 s (kb.models.base.with_retries): more would hold a call for hours.
RETRIES = Range(0, 100)
# Model calls in flight at once, each a thread.
LLM_CONCURRENCY = Range(1, 1024)
TOP_K = Range(1, MAX_TOP_K)


def load_config(path: Path | None = None, env: dict[str, str] | None = None) -> Config:
    """Read, override from the environment, and validate the configuration."""
    env = dict(os.environ) if env is None else env
    path = find_config_file(path, env)
    try:
        raw = tomllib.loads(read_config_text(path))
    except FileNotFoundError:
        raise ConfigError(
            f"no config file at {path}: copy config.example.toml there or pass --config"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read config {path}: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config {path} is not valid TOML: {exc}") from None
    except RecursionError:
        raise ConfigError(f"config {path} is not valid TOML: a value nested too deeply") from None
    return parse_config(raw, base_dir=path.parent, env=env, source=path)


# Far above any config (the example is 15 KB), far below what a link to a device or a
# runaway file would make kb read.
MAX_CONFIG_BYTES = 1024 * 1024


def read_config_text(path: Path) -> str:
    """A config file's text; ConfigError, in one line, for what is no config file: not a
    regular file (a FIFO would block the read for ever, /dev/zero never end it) or larger
    than MAX_CONFIG_BYTES. A UTF-8 byte order mark, which Windows editors write, is dropped."""
    # Opened without blocking, so a FIFO is looked at, not waited on.
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    with open(fd, "rb") as file:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ConfigError(f"config {path} is not a regular file")
        data = file.read(MAX_CONFIG_BYTES + 1)
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError(f"config {path} is larger than 1 MiB: not a config file")
    return data.decode("utf-8-sig")


def parse_config(
    raw: dict[str, Any],
    *,
    base_dir: Path,
    env: dict[str, str],
    source: Path | None = None,
) -> Config:
    r = _Reader(raw)
    owner = _env(env, "KB_OWNER_NAME", r.get("owner_name", str, ""))
    if not owner.strip():
        raise ConfigError("config key 'owner_name' is required (the vault owner's full name)")
    configured_dir = r.get("data_dir", str, None)
    if configured_dir == "":
        # Taken for "no data_dir", it would put the index in the default folder unannounced.
        raise ConfigError("config key 'data_dir' is empty: name a folder, or leave the key out")
    data_dir = _env(env, "KB_DATA_DIR", configured_dir or "")
    database_url = env.get("KB_DATABASE_URL", r.get("database.url", str, ""))

    vaults = _vaults(r, base_dir)
    llm = _llm(r, env)
    ask = _ask(r, env, llm)
    context = _context(r)
    # Shorter chunks than a paragraph lose what they are about; longer than a note may be.
    max_chars = r.number("chunking.max_chars", ChunkingConfig.max_chars, Range(200, 16 << 20))
    rerank = _rerank(r, env, base_dir)
    query = _query(r, context, rerank, base_dir)
    daemon = _daemon(r, env)
    enrich = _enrich(r)
    # Only once every key has been read can the rest be called unknown.
    r.reject_unknown()
    return Config(
        owner_name=owner.strip(),
        vaults=vaults,
        database_url=database_url,
        data_dir=_path(data_dir, base_dir) if data_dir else default_data_dir(),
        chunking=ChunkingConfig(max_chars=max_chars),
        context=context,
        llm=llm,
        ask=ask,
        query=query,
        rerank=rerank,
        daemon=daemon,
        enrich=enrich,
        source=source,
        environment=_environment_read(llm.provider, env),
    )


def _environment_read(provider: str, env: dict[str, str]) -> tuple[tuple[str, str], ...]:
    from kb.models.providers import provider as spec_of

    variable = spec_of(provider).host_variable
    return ((variable, env.get(variable, "")),) if variable else ()


def _vaults(r: _Reader, base_dir: Path) -> tuple[VaultConfig, ...]:
    vault_tables = r.get("vaults", list, [])
    if not vault_tables:
        raise ConfigError("config key 'vaults' must list at least one [[vaults]] table")
    vaults = tuple(
        _vault(_Reader(v, f"vaults[{i}]."), base_dir)
        for i, v in enumerate(_tables(vault_tables, "vaults"))
    )
    names = [v.name for v in vaults]
    if len(set(names)) != len(names):
        raise ConfigError("config key 'vaults.name' must be unique across vaults")
    _refuse_overlaps(vaults)
    return vaults


def _llm(r: _Reader, env: dict[str, str]) -> LLMConfig:
    # Imported here: kb.llm imports this module.
    from kb.models.providers import provider as spec_of

    provider = _env(env, "KB_PROVIDER", r.get("llm.provider", str, LLMConfig.provider))
    spec = spec_of(provider, key="config key 'llm.provider'")
    host = r.get("llm.host", str, "") or spec.default_host  # an empty host means the default
    if spec.host_variable and env.get(spec.host_variable):
        host = spec.host_url(env[spec.host_variable])
    chat_host = _env(env, "KB_CHAT_HOST", r.get("llm.chat_host", str, "") or host)
    embed_host = _env(env, "KB_EMBED_HOST", r.get("llm.embed_host", str, "") or host)
    if spec.needs_host and not (chat_host and embed_host):
        raise ConfigError("config key 'llm.host' (or llm.chat_host and llm.embed_host) is required")
    return LLMConfig(
        provider=provider,
        chat_host=chat_host,
        embed_host=embed_host,
        api_key=_env(env, "KB_API_KEY", r.get("llm.api_key", str, "")),
        chat_model=_env(env, "KB_CHAT_MODEL", r.get("llm.chat_model", str, LLMConfig.chat_model)),
        embed_model=_env(
            env, "KB_EMBED_MODEL", r.get("llm.embed_model", str, LLMConfig.embed_model)
        ),
        context_window=r.number("llm.context_window", LLMConfig.context_window, TOKENS),
        concurrency=_env_int(
            env,
            "KB_LLM_CONCURRENCY",
            r.number("llm.concurrency", LLMConfig.concurrency, LLM_CONCURRENCY),
            LLM_CONCURRENCY,
        ),
        timeout=r.number("llm.timeout", LLMConfig.timeout, SECONDS),
        timeout_per_token=r.number(
            "llm.timeout_per_token", LLMConfig.timeout_per_token, Range(0, 3600)
        ),
        retries=r.number("llm.retries", LLMConfig.retries, RETRIES),
        embed_batch=r.number("llm.embed_batch", LLMConfig.embed_batch, Range(1, 10_000)),
        embed_query_prefix=r.get("llm.embed_query_prefix", str, None),
        embed_document_prefix=r.get("llm.embed_document_prefix", str, None),
        # Fewer tokens than a prefix and a few words would leave nothing to embed.
        embed_window=r.number("llm.embed_window", None, Range(32, TOKENS.high), whole=True),
    )


def _ask(r: _Reader, env: dict[str, str], llm: LLMConfig) -> AskConfig:
    from kb.models.providers import provider as spec_of

    provider = r.get("ask.provider", str, "")
    spec = spec_of(provider, key="config key 'ask.provider'") if provider else None
    ask = AskConfig(
        provider=provider or None,
        host=_env(env, "KB_ASK_HOST", r.get("ask.host", str, "")).strip(),
        chat_model=_env(env, "KB_ASK_MODEL", r.get("ask.chat_model", str, "")).strip(),
        api_key=_env(env, "KB_ASK_API_KEY", r.get("ask.api_key", str, "")),
        context_window=r.number("ask.context_window", None, TOKENS, whole=True),
        passages=r.number("ask.passages", AskConfig.passages, TOP_K, whole=True),
    )
    if spec is None:
        return ask
    if ask.host:
        ask = replace(ask, host=spec.host_url(ask.host))
    if provider != llm.provider and spec.has_server and not ask.host:
        # [llm]'s server speaks the other protocol, or there is none.
        raise ConfigError(
            f"config key 'ask.host' is required with ask.provider = \"{ask.provider}\" "
            f'(llm.provider is "{llm.provider}")'
        )
    return ask


def _context(r: _Reader) -> ContextConfig:
    context = ContextConfig(
        first_chunks=r.number("context.first_chunks", ContextConfig.first_chunks, CHUNKS),
        last_chunks=r.number("context.last_chunks", ContextConfig.last_chunks, CHUNKS),
        summary_max_tokens=r.number(
            "context.summary_max_tokens", ContextConfig.summary_max_tokens, TOKENS
        ),
        rewrite_personal=r.get("context.rewrite_personal", bool, ContextConfig.rewrite_personal),
        summaries=r.get("context.summaries", str, ContextConfig.summaries),
        batch_chunks=r.number(
            "context.batch_chunks", ContextConfig.batch_chunks, Range(1, CHUNKS.high)
        ),
        passages=r.get("context.passages", str, ContextConfig.passages),
        writes=tuple(r.get("context.writes", list, list(ContextConfig.writes))),
    )
    if context.summaries not in SUMMARY_MODES:
        raise ConfigError(
            f"config key 'context.summaries' must be one of {', '.join(SUMMARY_MODES)}"
        )
    if context.passages not in PASSAGE_MODES:
        raise ConfigError(
            f"config key 'context.passages' must be one of {', '.join(PASSAGE_MODES)}"
        )
    if any(w not in MODEL_WRITES for w in context.writes) or len(set(context.writes)) < len(
        context.writes
    ):
        raise ConfigError(
            f"config key 'context.writes' must list some of {', '.join(MODEL_WRITES)}, once each"
        )
    if context.first_chunks + context.last_chunks == 0:
        raise ConfigError(
            "config keys 'context.first_chunks' and 'context.last_chunks' must not both be 0"
        )
    return context


def _query(r: _Reader, context: ContextConfig, rerank: RerankConfig, base_dir: Path) -> QueryConfig:
    # The model's voices and lines make the vector list strong enough for a larger share.
    fusion = default_fusion(context.names_writers())
    ranker_file = r.get("query.ranker_file", str, None)
    query = QueryConfig(
        top_k=r.number("query.top_k", QueryConfig.top_k, TOP_K),
        owner_in_first_person=r.get(
            "query.owner_in_first_person", bool, QueryConfig.owner_in_first_person
        ),
        mode=r.get("query.mode", str, QueryConfig.mode),
        # A cross-encoder someone set up is cheap enough to use by default; the chat judge
        # (about 50 s a query on a laptop) waits to be asked.
        rerank=r.get("query.rerank", bool, rerank.backend != "chat"),
        rerank_candidates=r.number("query.rerank_candidates", QueryConfig.rerank_candidates, TOP_K),
        rerank_chars=r.number("query.rerank_chars", QueryConfig.rerank_chars, COUNT),
        fusion=Fusion(
            method=r.get("query.fusion", str, fusion.method),
            vector_weight=r.number("query.vector_weight", fusion.vector_weight, SHARE),
        ),
        ranker=r.get("query.ranker", str, QueryConfig.ranker),
        ranker_file=_path(ranker_file, base_dir) if ranker_file else None,
    )
    if query.ranker not in ORDERINGS:
        raise ConfigError(f"config key 'query.ranker' must be one of {', '.join(ORDERINGS)}")
    if query.mode not in SEARCH_MODES:
        raise ConfigError(f"config key 'query.mode' must be one of {', '.join(SEARCH_MODES)}")
    if query.fusion.method not in FUSION_METHODS:
        raise ConfigError(f"config key 'query.fusion' must be one of {', '.join(FUSION_METHODS)}")
    return query


def _enrich(r: _Reader) -> EnrichConfig:
    return EnrichConfig(
        enabled=r.get("enrich.enabled", bool, EnrichConfig.enabled),
        concurrency=r.number(
            "enrich.concurrency", EnrichConfig.concurrency, Range(1, MAX_ENRICH_CONCURRENCY)
        ),
        in_daemon=r.get("enrich.in_daemon", bool, EnrichConfig.in_daemon),
        # Shorter than a renewal's round trip, a lease would run out under a working worker.
        lease=r.number("enrich.lease", EnrichConfig.lease, Range(5, YEAR)),
    )


def _rerank(r: _Reader, env: dict[str, str], base_dir: Path) -> RerankConfig:
    d = RerankConfig
    backend = r.get("rerank.backend", str, d.backend)
    if backend not in RERANK_BACKENDS:
        raise ConfigError(
            f"config key 'rerank.backend' must be one of {', '.join(RERANK_BACKENDS)}"
        )
    url = r.get("rerank.url", str, d.url).strip()
    if backend == "http" and not re.match(r"https?://[^/\s]", url, re.I):
        raise ConfigError(
            "config key 'rerank.url' must be the http(s) address of a /rerank endpoint, "
            "e.g. http://localhost:8080/rerank"
        )
    folder = r.get("rerank.folder", str, "").strip()
    if backend == "onnx" and not folder:
        raise ConfigError(
            "config key 'rerank.folder' is required with rerank.backend = \"onnx\" "
            "(the folder holding model.onnx and tokenizer.json)"
        )
    style = r.get("rerank.style", str, d.style)
    if style not in RERANK_STYLES:
        raise ConfigError(f"config key 'rerank.style' must be one of {', '.join(RERANK_STYLES)}")
    return RerankConfig(
        backend=backend,
        url=url,
        model=r.get("rerank.model", str, d.model),
        api_key=_env(env, "KB_RERANK_API_KEY", r.get("rerank.api_key", str, d.api_key)),
        style=style,
        timeout=r.number("rerank.timeout", d.timeout, SECONDS),
        folder=_path(folder, base_dir) if folder else None,
        candidates=r.number("rerank.candidates", d.candidates, TOP_K, whole=True),
        chars=r.number("rerank.chars", d.chars, COUNT, whole=True),
    )


def _daemon(r: _Reader, env: dict[str, str]) -> DaemonConfig:
    d = DaemonConfig
    polling = r.get("daemon.polling", bool, d.polling)
    if "KB_DAEMON_POLLING" in env:
        flag = env["KB_DAEMON_POLLING"].strip().lower()
        if flag not in ("1", "true", "yes", "0", "false", "no", ""):
            raise ConfigError("environment variable KB_DAEMON_POLLING must be true or false")
        polling = flag in ("1", "true", "yes")
    daemon = DaemonConfig(
        debounce=r.number("daemon.debounce", d.debounce, SECONDS),
        max_delay=r.number("daemon.max_delay", d.max_delay, SECONDS),
        reconcile_interval=r.number("daemon.reconcile_interval", d.reconcile_interval, SECONDS),
        reconcile_jitter=r.number(
            "daemon.reconcile_jitter", d.reconcile_jitter, Range(0, 1, below=True)
        ),
        max_pending=r.number("daemon.max_pending", d.max_pending, COUNT),
        heartbeat=r.number("daemon.heartbeat", d.heartbeat, SECONDS),
        shutdown_grace=r.number("daemon.shutdown_grace", d.shutdown_grace, SECONDS),
        polling=polling,
    )
    if daemon.max_delay < daemon.debounce:
        raise ConfigError("config key 'daemon.max_delay' must be at least daemon.debounce")
    return daemon


def _env_int(env: dict[str, str], name: str, file_value: int, within: Range) -> int:
    """A whole number from the environment, in the range its config key has."""
    given = env.get(name, "").strip()
    if not given:
        return file_value
    # ASCII digits alone: int() also reads "٣" and "1_0", and refuses "²", which isdigit takes.
    if not (given.isascii() and given.isdigit() and len(given) < 19 and within.holds(int(given))):
        raise ConfigError(f"environment variable {name} must be {_a_number(True, within)}")
    return int(given)


def _env(env: dict[str, str], name: str, file_value: str) -> str:
    # The file's value is read (and so type-checked and known) even when the env wins.
    return env.get(name) or file_value


def _path(value: str, base_dir: Path) -> Path:
    p = Path(os.path.expandvars(value)).expanduser()
    return p if p.is_absolute() else (base_dir / p).resolve()


def _tables(value: list[Any], key: str) -> list[dict[str, Any]]:
    if not all(isinstance(v, dict) for v in value):
        raise ConfigError(f"config key '{key}' must be a list of tables ([[{key}]])")
    return value


def _vault(r: _Reader, base_dir: Path) -> VaultConfig:
    path_value = r.get("path", str, "")
    if not path_value:
        raise ConfigError(f"config key '{r.prefix}path' is required")
    path = _path(path_value, base_dir)
    name = r.get("name", str, path.name)
    personal = tuple(r.get("personal", list, []))
    ignore = tuple(r.get("ignore", list, []))
    conflicts = r.get("conflicts", str, VaultConfig.conflicts)
    obsidian = r.get("obsidian", bool, VaultConfig.obsidian)
    date_key = r.get("date_key", str, "").strip()
    if conflicts not in CONFLICT_MODES:
        raise ConfigError(
            f"config key '{r.prefix}conflicts' must be one of {', '.join(CONFLICT_MODES)}"
        )
    for key, patterns in (("personal", personal), ("ignore", ignore)):
        if not all(isinstance(p, str) for p in patterns):
            raise ConfigError(f"config key '{r.prefix}{key}' must be a list of glob strings")
        for pattern in patterns:
            if problem := glob_problem(pattern):
                raise ConfigError(
                    f"config key '{r.prefix}{key}' (vault '{name}') has an invalid glob "
                    f"{pattern!r}: {problem}"
                )
    r.reject_unknown()
    keys = (date_key, *DEFAULT_DATE_KEYS) if date_key else DEFAULT_DATE_KEYS
    return VaultConfig(
        name=name,
        path=path,
        personal=personal,
        ignore=ignore,
        conflicts=conflicts,
        obsidian=obsidian,
        dates=DateRules(keys=keys),
    )


def glob_problem(pattern: str) -> str | None:
    """Why a glob cannot be compiled, or None: checked before any use, since globs are
    otherwise compiled only when the first path is matched, deep inside a sync."""
    try:
        pathspec.GitIgnoreSpec.from_lines([composed(pattern)])
    except re.error as exc:
        return exc.msg  # without the position in the regular expression it became
    except ValueError:
        return "not a gitignore-style pattern"
    return None


def _refuse_overlaps(vaults: tuple[VaultConfig, ...]) -> None:
    """Two vaults that read the same notes would index each twice, and every search would
    return its passages twice. A vault inside another is allowed only where the outer one
    skips its folder (an ignore glob, a dot-folder), as a scan would."""
    real = [(v, Path(os.path.realpath(v.path))) for v in vaults]
    for (a, real_a), (b, real_b) in itertools.combinations(real, 2):
        for outer, real_outer, inner, real_inner in (
            (a, real_a, b, real_b),
            (b, real_b, a, real_a),
        ):
            rel = _within(real_outer, real_inner)
            if rel is None:
                continue
            if not rel.parts:
                raise ConfigError(
                    f"vaults '{a.name}' and '{b.name}' are the same folder ({a.path}): "
                    "configure it as one vault"
                )
            if not _skips(outer, rel):
                raise ConfigError(
                    f"vault '{inner.name}' ({inner.path}) is inside vault '{outer.name}' "
                    f"({outer.path}), whose notes would be indexed twice: add "
                    f"'{rel.as_posix()}/' to the ignore list of '{outer.name}'"
                )


def _within(outer: Path, inner: Path) -> Path | None:
    """Where `inner` lies inside `outer` (no parts if it is `outer`), or None. Both are
    resolved; an ancestor the file system takes for `outer` counts too (a differently
    cased name on a case-insensitive disk)."""
    for ancestor in (inner, *inner.parents):
        if ancestor == outer or _same_folder(ancestor, outer):
            return inner.relative_to(ancestor)
    return None


def _same_folder(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False  # one does not exist (yet): only equal paths are the same


def _skips(vault: VaultConfig, rel: Path) -> bool:
    """Whether a scan of `vault` leaves out the folder `rel` (or a folder above it)."""
    parts = rel.parts
    return any(vault.is_ignored("/".join(parts[: i + 1]) + "/") for i in range(len(parts)))


class _Reader:
    """Typed access to nested TOML keys that remembers which keys were read, and the one
    place every value is checked: each text for NUL characters (PostgreSQL text and file
    names cannot hold one), each number for its range, with one line naming the key."""

    _KNOWN_SECTIONS = (
        "database",
        "chunking",
        "context",
        "llm",
        "ask",
        "query",
        "rerank",
        "daemon",
        "enrich",
    )

    def __init__(self, raw: dict[str, Any], prefix: str = "") -> None:
        self.raw = raw
        self.prefix = prefix
        self.seen: set[str] = set()

    def get(self, dotted: str, kind: type, default: Any) -> Any:
        self.seen.add(dotted)
        node: Any = self.raw
        for part in dotted.split("."):
            if not isinstance(node, dict) or part not in node:
                return default
            node = node[part]
        if kind is float and isinstance(node, int) and not isinstance(node, bool):
            node = float(node)
        if (kind is int and isinstance(node, bool)) or not isinstance(node, kind):
            raise ConfigError(
                f"config key '{self.prefix}{dotted}' must be {_KIND_NAMES.get(kind, kind.__name__)}"
            )
        texts = node if isinstance(node, list) else [node]
        if any(isinstance(text, str) and "\x00" in text for text in texts):
            raise ConfigError(f"config key '{self.prefix}{dotted}' holds a NUL character")
        return node

    def number(
        self, dotted: str, default: float | None, within: Range, *, whole: bool | None = None
    ) -> Any:
        """A number key in `within`: a whole number where `whole` says, or the default is."""
        whole = not isinstance(default, float) if whole is None else whole
        value = self.get(dotted, int if whole else float, default)
        if value is not None and not within.holds(value):
            raise ConfigError(
                f"config key '{self.prefix}{dotted}' must be {_a_number(whole, within)}"
            )
        return value

    def reject_unknown(self) -> None:
        for key, value in self.raw.items():
            if key in self._KNOWN_SECTIONS and not self.prefix and not isinstance(value, dict):
                raise ConfigError(f"config key '{key}' must be a table ([{key}])")
            if isinstance(value, dict) and key in self._KNOWN_SECTIONS and not self.prefix:
                for sub in value:
                    if f"{key}.{sub}" not in self.seen:
                        raise ConfigError(f"unknown config key '{key}.{sub}'")
            elif key not in self.seen and key not in self._KNOWN_SECTIONS:
                raise ConfigError(f"unknown config key '{self.prefix}{key}'")


def _a_number(whole: bool, within: Range) -> str:
    return f"{'a whole number' if whole else 'a number'} {within}"


_KIND_NAMES = {
    str: "a string",
    int: "an integer",
    bool: "true or false",
    list: "a list",
    float: "a number",
}
