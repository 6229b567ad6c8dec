"""Reading and checking the configuration (pure: no database, no model server)."""

from __future__ import annotations

import dataclasses
import os
import re
import threading
import tomllib
from pathlib import Path
from typing import Any

import pytest

from kb.config import (
    CONFLICT_PATTERNS,
    DEFAULT_OLLAMA_HOST,
    AskConfig,
    ChunkingConfig,
    Config,
    ContextConfig,
    DaemonConfig,
    LLMConfig,
    QueryConfig,
    RerankConfig,
    VaultConfig,
    _globs,
    _spec,
    load_config,
    parse_config,
)
from kb.errors import ConfigError
from kb.fusion import Fusion

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "config.example.toml"
BASE = Path("/srv/kb")


def minimal(**extra: Any) -> dict[str, Any]:
    return {"owner_name": "Alex Doe", "vaults": [{"path": "/notes"}], **extra}


def parse(raw: dict[str, Any], env: dict[str, str] | None = None) -> Config:
    return parse_config(raw, base_dir=BASE, env=env or {})


def error(raw: dict[str, Any], env: dict[str, str] | None = None) -> str:
    with pytest.raises(ConfigError) as info:
        parse(raw, env)
    message = str(info.value)
    assert "\n" not in message
    return message


# --- valid configs -----------------------------------------------------------------------------


def test_minimal_config_gets_defaults() -> None:
    cfg = parse(minimal())
    assert cfg.owner_name == "Alex Doe"
    assert cfg.vaults == (VaultConfig(name="notes", path=Path("/notes")),)
    assert cfg.database_url == ""
    assert cfg.chunking == ChunkingConfig()
    assert cfg.context == ContextConfig()
    assert cfg.query == QueryConfig()
    assert cfg.llm.provider == "ollama"
    assert cfg.llm.chat_host == cfg.llm.embed_host == DEFAULT_OLLAMA_HOST


def test_owner_name_is_stripped() -> None:
    assert parse({**minimal(), "owner_name": "  Alex Doe "}).owner_name == "Alex Doe"


def test_all_sections_read() -> None:
    cfg = parse(
        minimal(
            database={"url": "postgresql://kb@db/kb"},
            chunking={"max_chars": 800},
            context={"first_chunks": 1, "last_chunks": 0, "rewrite_personal": False},
            llm={"provider": "fake", "chat_model": "c", "embed_model": "e", "timeout": 5},
            query={"top_k": 9, "owner_in_first_person": False},
        )
    )
    assert cfg.database_url == "postgresql://kb@db/kb"
    assert cfg.chunking.max_chars == 800
    assert (cfg.context.first_chunks, cfg.context.last_chunks) == (1, 0)
    assert cfg.context.rewrite_personal is False
    assert (cfg.llm.provider, cfg.llm.chat_model, cfg.llm.embed_model) == ("fake", "c", "e")
    assert cfg.llm.timeout == 5.0
    assert isinstance(cfg.llm.timeout, float)
    assert cfg.query == QueryConfig(top_k=9, owner_in_first_person=False)


@pytest.mark.parametrize(
    ("context", "query", "expected"),
    [
        # The model's voices and lines in the vector list: it earns the larger share.
        ({}, {}, Fusion("dbsf", 0.3)),
        ({"writes": ["statements"], "passages": "none"}, {}, Fusion("dbsf", 0.3)),
        ({"writes": ["voices"]}, {}, Fusion("dbsf", 0.3)),
        # Nothing of the model's among the vectors: BM25 leads.
        ({"summaries": "structure"}, {}, Fusion("dbsf", 0.15)),
        ({"writes": ["summaries"]}, {}, Fusion("dbsf", 0.15)),
        ({"writes": ["voices"], "passages": "none"}, {}, Fusion("dbsf", 0.15)),
        # What the config says wins; what it leaves out is the index's default.
        ({"summaries": "structure"}, {"fusion": "rrf"}, Fusion("rrf", 0.15)),
        ({}, {"vector_weight": 0.5}, Fusion("dbsf", 0.5)),
    ],
)
def test_the_default_fusion_follows_what_the_vectors_hold(
    context: dict[str, Any], query: dict[str, Any], expected: Fusion
) -> None:
    assert parse(minimal(context=context, query=query)).query.fusion == expected


def test_vault_name_defaults_to_folder_name() -> None:
    cfg = parse({**minimal(), "vaults": [{"path": "/a/Work Notes"}, {"path": "/b", "name": "x"}]})
    assert [v.name for v in cfg.vaults] == ["Work Notes", "x"]


# --- errors ------------------------------------------------------------------------------------


def test_missing_owner_name() -> None:
    raw = minimal()
    del raw["owner_name"]
    assert "'owner_name'" in error(raw)
    assert "'owner_name'" in error({**raw, "owner_name": "   "})


def test_owner_name_from_env() -> None:
    raw = minimal()
    del raw["owner_name"]
    assert parse(raw, {"KB_OWNER_NAME": "Sam Roe"}).owner_name == "Sam Roe"


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        (minimal(chunking={"max_chars": "big"}), "chunking.max_chars"),
        (minimal(chunking={"max_chars": 1.5}), "chunking.max_chars"),
        (minimal(query={"top_k": True}), "query.top_k"),
        (minimal(query={"owner_in_first_person": "yes"}), "query.owner_in_first_person"),
        (minimal(llm={"timeout": "slow"}), "llm.timeout"),
        (minimal(database={"url": 5}), "database.url"),
        (minimal(context={"rewrite_personal": 1}), "context.rewrite_personal"),
        ({**minimal(), "owner_name": 7}, "owner_name"),
        ({**minimal(), "vaults": [{"path": 3}]}, "vaults[0].path"),
        ({**minimal(), "vaults": [{"path": "/a", "ignore": "*.tmp"}]}, "vaults[0].ignore"),
        ({**minimal(), "vaults": [{"path": "/a", "personal": [1]}]}, "vaults[0].personal"),
        ({**minimal(), "vaults": "/notes"}, "vaults"),
        ({**minimal(), "vaults": ["/notes"]}, "vaults"),
    ],
)
def test_wrong_type_names_the_key(raw: dict[str, Any], key: str) -> None:
    assert f"'{key}'" in error(raw)


@pytest.mark.parametrize("section", ["database", "chunking", "context", "llm", "query", "daemon"])
def test_section_that_is_not_a_table(section: str) -> None:
    assert f"'{section}'" in error(minimal(**{section: 5}))


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        (minimal(colour="blue"), "colour"),
        (minimal(llm={"modle": "x"}), "llm.modle"),
        (minimal(chunking={"max_chars": 800, "overlap": 100}), "chunking.overlap"),
        (minimal(query={"top_k": 3, "topk": 3}), "query.topk"),
        (minimal(database={"uri": "x"}), "database.uri"),
        ({**minimal(), "vaults": [{"path": "/a", "exclude": ["x"]}]}, "vaults[0].exclude"),
        (
            {**minimal(), "vaults": [{"path": "/a"}, {"path": "/b", "persnal": []}]},
            "vaults[1].persnal",
        ),
    ],
)
def test_unknown_key_named(raw: dict[str, Any], key: str) -> None:
    message = error(raw)
    assert "unknown" in message
    assert f"'{key}'" in message


def test_every_known_section_key_is_accepted() -> None:
    # Guards against a key being read only after unknown keys are rejected.
    cfg = parse(
        minimal(
            query={"top_k": 2, "owner_in_first_person": True},
            context={"first_chunks": 2, "last_chunks": 2, "summary_max_tokens": 10},
        )
    )
    assert cfg.query.top_k == 2
    assert cfg.context.summary_max_tokens == 10


@pytest.mark.parametrize("vaults", [[], None])
def test_no_vaults(vaults: list[Any] | None) -> None:
    raw = minimal(vaults=vaults) if vaults is not None else minimal()
    if vaults is None:
        del raw["vaults"]
    assert "'vaults'" in error(raw)


def test_vault_without_path() -> None:
    assert "'vaults[0].path'" in error({**minimal(), "vaults": [{"name": "x"}]})


def test_duplicate_vault_names() -> None:
    raw = {**minimal(), "vaults": [{"path": "/a/notes"}, {"path": "/b/notes"}]}
    assert "unique" in error(raw)
    raw = {**minimal(), "vaults": [{"path": "/a", "name": "n"}, {"path": "/b", "name": "n"}]}
    assert "unique" in error(raw)


def test_bad_provider() -> None:
    message = error(minimal(llm={"provider": "gpt"}))
    assert "'llm.provider'" in message
    assert "ollama" in message


@pytest.mark.parametrize(
    ("section", "value", "key"),
    [
        ("chunking", {"max_chars": 0}, "chunking.max_chars"),
        ("chunking", {"max_chars": 199}, "chunking.max_chars"),
        ("llm", {"concurrency": -1}, "llm.concurrency"),
        ("llm", {"context_window": 0}, "llm.context_window"),
        ("query", {"top_k": 0}, "query.top_k"),
        ("context", {"first_chunks": 0, "last_chunks": 0}, "context.first_chunks"),
        ("context", {"first_chunks": -1}, "context.first_chunks"),
        ("context", {"summaries": "all"}, "context.summaries"),
        ("query", {"rerank_candidates": 0}, "query.rerank_candidates"),
        ("query", {"rerank_chars": -5}, "query.rerank_chars"),
        ("query", {"rerank": "yes"}, "query.rerank"),
        ("enrich", {"concurrency": 100_000}, "enrich.concurrency"),
    ],
)
def test_out_of_range_values(section: str, value: dict[str, Any], key: str) -> None:
    assert f"'{key}'" in error(minimal(**{section: value}))


# --- LLM hosts and environment -----------------------------------------------------------------


def test_database_url_env_overrides_file() -> None:
    raw = minimal(database={"url": "postgresql://file/kb"})
    assert parse(raw).database_url == "postgresql://file/kb"
    env = {"KB_DATABASE_URL": "postgresql://env/kb"}
    assert parse(raw, env).database_url == "postgresql://env/kb"


@pytest.mark.parametrize(
    ("value", "url"),
    [
        ("0.0.0.0:11434", "http://0.0.0.0:11434"),
        ("gpu-box", "http://gpu-box"),
        ("http://10.0.0.5:11434", "http://10.0.0.5:11434"),
        ("https://ollama.example.org", "https://ollama.example.org"),
    ],
)
def test_ollama_host_env(value: str, url: str) -> None:
    cfg = parse(minimal(llm={"host": "http://from-file:1"}), {"OLLAMA_HOST": value})
    assert cfg.llm.chat_host == url
    assert cfg.llm.embed_host == url
    assert cfg.environment == (("OLLAMA_HOST", value),)


def test_the_config_names_the_variables_its_provider_read() -> None:
    assert parse(minimal(), {}).environment == (("OLLAMA_HOST", ""),)
    openai = minimal(llm={"provider": "openai", "host": "http://h/v1"})
    assert parse(openai, {"OLLAMA_HOST": "h:1"}).environment == ()


def test_ollama_host_from_file_and_empty_host_means_default() -> None:
    assert parse(minimal(llm={"host": "http://h:1"})).llm.chat_host == "http://h:1"
    cfg = parse(minimal(llm={"host": "", "chat_host": "", "embed_host": ""}))
    assert cfg.llm.chat_host == cfg.llm.embed_host == DEFAULT_OLLAMA_HOST


def test_separate_chat_and_embed_hosts() -> None:
    cfg = parse(minimal(llm={"chat_host": "http://chat:1", "embed_host": "http://embed:2"}))
    assert (cfg.llm.chat_host, cfg.llm.embed_host) == ("http://chat:1", "http://embed:2")
    env = {"KB_CHAT_HOST": "http://c", "KB_EMBED_HOST": "http://e", "OLLAMA_HOST": "o:1"}
    cfg = parse(minimal(), env)
    assert (cfg.llm.chat_host, cfg.llm.embed_host) == ("http://c", "http://e")


def test_answers_use_the_llm_chat_model_unless_ask_names_one() -> None:
    cfg = parse(minimal(llm={"api_key": "local", "context_window": 4096}))
    assert cfg.ask == AskConfig() and not cfg.ask.own_model()
    assert cfg.ask.llm(cfg.llm) == cfg.llm


def test_ask_names_a_bigger_model_on_the_same_server() -> None:
    cfg = parse(minimal(llm={"api_key": "local"}, ask={"chat_model": "qwen2.5:7b"}))
    answers = cfg.ask.llm(cfg.llm)
    assert cfg.ask.own_model()
    assert answers == dataclasses.replace(cfg.llm, chat_model="qwen2.5:7b")
    # Everything else keeps [llm]'s model.
    assert cfg.llm.chat_model == LLMConfig.chat_model


def test_ask_names_a_remote_server_that_gets_only_its_own_key() -> None:
    remote = {"provider": "openai", "host": "https://api.example.org/v1", "chat_model": "big"}
    cfg = parse(minimal(llm={"api_key": "local"}, ask=remote | {"context_window": 32768}))
    answers = cfg.ask.llm(cfg.llm)
    assert (answers.provider, answers.chat_host, answers.chat_model) == (
        "openai",
        "https://api.example.org/v1",
        "big",
    )
    assert answers.api_key == "" and answers.context_window == 32768
    # The embedder stays where it was.
    assert (answers.embed_host, answers.embed_model) == (cfg.llm.embed_host, cfg.llm.embed_model)
    env = {"KB_ASK_API_KEY": "remote", "KB_ASK_MODEL": "bigger", "KB_ASK_HOST": "http://h/v1"}
    answers = parse(minimal(ask=remote), env).ask.llm(cfg.llm)
    assert (answers.api_key, answers.chat_model, answers.chat_host) == (
        "remote",
        "bigger",
        "http://h/v1",
    )


def test_ask_settings_are_checked() -> None:
    assert "'ask.provider'" in error(minimal(ask={"provider": "gpt"}))
    # [llm]'s Ollama server cannot answer an OpenAI-compatible request.
    assert "'ask.host'" in error(minimal(ask={"provider": "openai"}))
    assert "'ask.context_window'" in error(minimal(ask={"context_window": 0}))
    assert "'ask.passages'" in error(minimal(ask={"passages": 0}))
    assert "'ask.passages'" in error(minimal(ask={"passages": 2.5}))
    assert "'ask.chat_model'" in error(minimal(ask={"chat_model": 7}))
    assert "unknown config key 'ask.model'" in error(minimal(ask={"model": "x"}))
    cfg = parse(minimal(ask={"provider": "ollama", "host": "gpu-box:11434"}))
    assert cfg.ask.host == "http://gpu-box:11434"


def test_openai_provider_needs_a_host() -> None:
    assert "'llm.host'" in error(minimal(llm={"provider": "openai"}))
    # OLLAMA_HOST is not a host for an OpenAI-compatible server.
    assert "'llm.host'" in error(minimal(llm={"provider": "openai"}), {"OLLAMA_HOST": "h:1"})
    only_chat = minimal(llm={"provider": "openai", "chat_host": "http://c/v1"})
    assert "'llm.host'" in error(only_chat)
    cfg = parse(minimal(llm={"provider": "openai", "host": "http://127.0.0.1:8080/v1"}))
    assert cfg.llm.chat_host == cfg.llm.embed_host == "http://127.0.0.1:8080/v1"


def test_provider_and_concurrency_env_overrides() -> None:
    env = {"KB_PROVIDER": "fake", "KB_LLM_CONCURRENCY": "1"}
    cfg = parse(minimal(llm={"provider": "ollama", "concurrency": 4}), env)
    assert (cfg.llm.provider, cfg.llm.concurrency) == ("fake", 1)
    for bad in ("0", "-2", "two"):
        with pytest.raises(ConfigError, match="KB_LLM_CONCURRENCY"):
            parse(minimal(), {"KB_LLM_CONCURRENCY": bad})


def test_model_and_key_env_overrides() -> None:
    env = {"KB_CHAT_MODEL": "m1", "KB_EMBED_MODEL": "m2", "KB_API_KEY": "k"}
    cfg = parse(minimal(llm={"chat_model": "x", "embed_model": "y", "api_key": "z"}), env)
    assert (cfg.llm.chat_model, cfg.llm.embed_model, cfg.llm.api_key) == ("m1", "m2", "k")


@pytest.mark.parametrize(
    ("env_name", "raw", "read"),
    [
        ("KB_OWNER_NAME", minimal(), lambda c: c.owner_name),
        ("KB_DATA_DIR", minimal(data_dir="/file/dir"), lambda c: str(c.data_dir)),
        ("KB_CHAT_HOST", minimal(llm={"chat_host": "http://file"}), lambda c: c.llm.chat_host),
        ("KB_EMBED_HOST", minimal(llm={"embed_host": "http://f"}), lambda c: c.llm.embed_host),
        ("KB_API_KEY", minimal(llm={"api_key": "file"}), lambda c: c.llm.api_key),
        ("KB_CHAT_MODEL", minimal(llm={"chat_model": "file"}), lambda c: c.llm.chat_model),
        ("KB_EMBED_MODEL", minimal(llm={"embed_model": "file"}), lambda c: c.llm.embed_model),
        ("KB_DATABASE_URL", minimal(database={"url": "file"}), lambda c: c.database_url),
    ],
)
def test_env_wins_over_a_key_also_set_in_the_file(
    env_name: str, raw: dict[str, Any], read: Any
) -> None:
    # The file's key is still known (not reported as unknown) when the env overrides it.
    assert read(parse(raw, {env_name: "/from/env"})) == "/from/env"


# --- paths -------------------------------------------------------------------------------------


def test_relative_vault_path_resolved_against_config_folder(tmp_path: Path) -> None:
    folder = tmp_path / "conf"
    folder.mkdir()
    cfg_file = folder / "kb.toml"
    cfg_file.write_text(
        'owner_name = "Alex Doe"\n[[vaults]]\npath = "vault"\n[[vaults]]\npath = "../other"\n',
        encoding="utf-8",
    )
    cfg = load_config(cfg_file, env={})
    assert cfg.vaults[0].path == (folder / "vault").resolve()
    assert cfg.vaults[1].path == (tmp_path / "other").resolve()
    assert cfg.source == cfg_file


def test_home_and_data_dir_paths() -> None:
    cfg = parse({**minimal(), "vaults": [{"path": "~/notes"}], "data_dir": "state"})
    assert cfg.vaults[0].path == Path("~/notes").expanduser()
    assert cfg.vaults[0].path.is_absolute()
    assert cfg.data_dir == (BASE / "state").resolve()
    assert parse(minimal(), {"KB_DATA_DIR": "/var/kb"}).data_dir == Path("/var/kb")


# --- vault globs -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "rel",
    [".obsidian/app.json", ".obsidian", ".trash/x.md", ".git/HEAD", "a/.hidden/b.md", "a/.x.md"],
)
def test_dot_paths_always_ignored(rel: str) -> None:
    assert VaultConfig("v", Path("/v")).is_ignored(rel)


def test_configured_ignore_globs() -> None:
    vault = VaultConfig("v", Path("/v"), ignore=("Templates/**", "*.excalidraw.md"))
    assert vault.is_ignored("Templates/daily.md")
    assert vault.is_ignored("Drawings/plan.excalidraw.md")
    assert not vault.is_ignored("Notes/Templates.md")
    assert not vault.is_ignored("Notes/plan.md")
    assert not VaultConfig("v", Path("/v")).is_ignored("Templates/daily.md")


@pytest.mark.parametrize(
    "globs",
    [
        CONFLICT_PATTERNS,
        ("Private/", "*.tmp.md", "Archive/**/old*.md", "[Dd]rafts/", "notes/a?c.md", "x/**/y/"),
        ("Journal/**", "!Journal/public.md"),  # a negation: pathspec's own order of patterns
    ],
)
@pytest.mark.parametrize("case_sensitive", [True, False])
def test_globs_searched_as_one_match_as_pathspec_does(
    globs: tuple[str, ...], case_sensitive: bool
) -> None:
    paths = [
        "a.md", "Journal/x.md", "journal/x.md", "Journal/public.md", "sub/Journal/a.md",
        "note (Conflicted copy 2023).md", "d/n.sync-conflict-2023.md", "N (my conflicted copy).md",
        "Private/a.md", "private/a.md", "a/Private/b.md", "Private", "Privatex/a.md", "x.tmp.md",
        "Archive/2020/old1.md", "Archive/old2.md", "drafts/a.md", "Drafts/b/c.md",
        "notes/abc.md", "notes/abbc.md", "x/q/y/z.md", "x/y/z.md", "x/y",
    ]  # fmt: skip
    one, spec = _globs(globs, case_sensitive), _spec(globs, case_sensitive)
    assert (one.any_of is None) == any(g.startswith("!") for g in globs)
    assert [one.match(p) for p in paths] == [spec.match_file(p) for p in paths]
    assert any(one.match(p) for p in paths) and not all(one.match(p) for p in paths)


def test_is_personal_globs() -> None:
    vault = VaultConfig("v", Path("/v"), personal=("Alex/**", "Journal/**"))
    assert vault.is_personal("Alex/Work Log.md")
    assert vault.is_personal("Alex/Journal/2024-04-12.md")
    assert vault.is_personal("Journal/2024.md")
    assert not vault.is_personal("Alexander/notes.md")
    assert not vault.is_personal("People/Alex.md")
    assert not vault.is_personal("Projects/Alex/x.md")
    assert not VaultConfig("v", Path("/v")).is_personal("Alex/Work Log.md")


@pytest.mark.parametrize("key", ["personal", "ignore"])
@pytest.mark.parametrize("glob", ["[z-a]", "!", "\\"])
def test_invalid_glob_names_the_key_and_the_vault(key: str, glob: str) -> None:
    raw = {**minimal(), "vaults": [{"path": "/a"}, {"path": "/notes", key: ["ok/**", glob]}]}
    message = error(raw)
    assert f"'vaults[1].{key}'" in message and "vault 'notes'" in message
    assert repr(glob) in message


@pytest.mark.parametrize(
    ("first", "second"),
    [("/srv/notes", "/srv/notes"), ("/srv/notes", "/srv/notes/"), ("/srv/notes", "/srv/./notes")],
)
def test_the_same_folder_as_two_vaults_is_refused(first: str, second: str) -> None:
    raw = {**minimal(), "vaults": [{"path": first, "name": "a"}, {"path": second, "name": "b"}]}
    message = error(raw)
    assert "'a'" in message and "'b'" in message and "same folder" in message


def test_a_vault_inside_another_is_refused_unless_the_outer_ignores_it(tmp_path: Path) -> None:
    outer, inner = tmp_path / "notes", tmp_path / "notes" / "Work" / "Team"
    inner.mkdir(parents=True)
    vaults: list[dict[str, Any]] = [
        {"path": str(inner), "name": "team"},
        {"path": str(outer), "name": "all"},
    ]
    message = error({**minimal(), "vaults": vaults})
    assert "'team'" in message and "inside" in message and "'all'" in message
    # Through a link to the outer folder: the same files.
    (tmp_path / "link").symlink_to(outer)
    linked = [{"path": str(tmp_path / "link"), "name": "all"}, {"path": str(inner), "name": "t"}]
    assert "inside" in error({**minimal(), "vaults": linked})
    # The outer vault skipping the folder (or a folder above it): no note is read twice.
    for ignore in (["Work/Team/"], ["Work/**"], ["/Work"]):
        vaults[1]["ignore"] = ignore
        parse({**minimal(), "vaults": vaults})
    (outer / ".archive").mkdir()
    dotted = [{"path": str(outer), "name": "all"}, {"path": str(outer / ".archive"), "name": "x"}]
    parse({**minimal(), "vaults": dotted})
    # Sibling folders sharing a prefix are not nested.
    parse({**minimal(), "vaults": [{"path": "/srv/notes"}, {"path": "/srv/notes2"}]})


# --- files -------------------------------------------------------------------------------------


def test_load_missing_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.toml"
    with pytest.raises(ConfigError) as info:
        load_config(missing, env={})
    message = str(info.value)
    assert str(missing) in message
    assert "\n" not in message


@pytest.mark.parametrize("content", ["owner_name = ", "[llm\nprovider = 'x'", "a = 1\na = 2"])
def test_load_invalid_toml(tmp_path: Path, content: str) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(content, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(bad, env={})
    message = str(info.value)
    assert "TOML" in message
    assert str(bad) in message
    assert "\n" not in message


def test_load_not_utf8(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_bytes(b"owner_name = '\xff'")
    with pytest.raises(ConfigError) as info:
        load_config(bad, env={})
    assert "\n" not in str(info.value)


def _refused(path: Path) -> str:
    """load_config's one line for `path`, within five seconds (a read that blocks fails)."""
    said: list[str] = []

    def load() -> None:
        try:
            load_config(path, env={})
        except ConfigError as exc:
            said.append(str(exc))

    reader = threading.Thread(target=load, daemon=True)
    reader.start()
    reader.join(5)
    assert not reader.is_alive(), "the config read did not return"
    assert len(said) == 1 and "\n" not in said[0] and str(path) in said[0], said
    return said[0]


def test_a_config_that_is_a_fifo_is_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "kb.toml"
    os.mkfifo(fifo)
    assert "not a regular file" in _refused(fifo)


def test_a_config_that_links_to_a_device_is_refused(tmp_path: Path) -> None:
    link = tmp_path / "kb.toml"
    link.symlink_to("/dev/zero")
    assert "not a regular file" in _refused(link)


def test_a_config_over_a_mebibyte_is_refused(tmp_path: Path) -> None:
    big = tmp_path / "kb.toml"
    big.write_text('owner_name = "A"\n' + "# padding\n" * 120_000, encoding="utf-8")
    assert "larger than 1 MiB" in _refused(big)


def test_a_config_nested_too_deeply_is_one_line(tmp_path: Path) -> None:
    deep = tmp_path / "kb.toml"
    deep.write_text("a = " + "[" * 5000 + "]" * 5000 + "\n", encoding="utf-8")
    assert "nested too deeply" in _refused(deep)


def test_a_config_with_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    marked = tmp_path / "kb.toml"
    marked.write_text('\ufeffowner_name = "Alex Doe"\n[[vaults]]\npath = "v"\n', encoding="utf-8")
    assert load_config(marked, env={}).owner_name == "Alex Doe"


def test_load_config_uses_kb_config_env(tmp_path: Path) -> None:
    cfg_file = tmp_path / "from-env.toml"
    cfg_file.write_text('owner_name = "Env"\n[[vaults]]\npath = "v"\n', encoding="utf-8")
    cfg = load_config(None, env={"KB_CONFIG": str(cfg_file)})
    assert cfg.owner_name == "Env"
    assert cfg.source == cfg_file


# --- the example file --------------------------------------------------------------------------


def test_example_config_loads() -> None:
    cfg = load_config(EXAMPLE, env={})
    assert cfg.owner_name == "Alex Doe"
    assert [v.name for v in cfg.vaults] == ["notes"]
    assert cfg.vaults[0].personal == ("Alex/**", "Journal/**")
    assert cfg.vaults[0].is_ignored("Templates/x.md")
    assert cfg.llm.provider == "ollama"
    assert cfg.llm.chat_host == DEFAULT_OLLAMA_HOST
    assert cfg.query.top_k == 5


def test_example_config_commented_keys_are_accepted(tmp_path: Path) -> None:
    # Keys shown commented out (`# key = value`) are real keys too.
    text = EXAMPLE.read_text(encoding="utf-8")
    uncommented = re.sub(r"(?m)^# ([a-z_]+ = .*)$", r"\1", text)
    assert uncommented != text
    copy = tmp_path / "config.toml"
    copy.write_text(uncommented, encoding="utf-8")
    load_config(copy, env={})


def _example_keys() -> dict[str, set[str]]:
    raw = tomllib.loads(EXAMPLE.read_text(encoding="utf-8"))
    keys: dict[str, set[str]] = {"": set()}
    for key, value in raw.items():
        if isinstance(value, dict):
            keys[key] = set(value)
        elif key == "vaults":
            keys[key] = {k for table in value for k in table}
        else:
            keys[""].add(key)
    return keys


def _commented_keys() -> dict[str, set[str]]:
    """Keys shown commented out (`# key = value`): settings with no default value to show."""
    keys: dict[str, set[str]] = {}
    section = ""
    for line in EXAMPLE.read_text(encoding="utf-8").splitlines():
        if header := re.fullmatch(r"\[+([\w.]+)\]+", line.strip()):
            section = header.group(1)
        elif key := re.match(r"#\s*(\w+)\s*=", line):
            keys.setdefault(section, set()).add(key.group(1))
    return keys


@pytest.mark.parametrize(
    ("section", "key"),
    [(s, k) for s, ks in _example_keys().items() for k in sorted(ks)],
)
def test_each_example_key_is_accepted_on_its_own(section: str, key: str) -> None:
    raw = tomllib.loads(EXAMPLE.read_text(encoding="utf-8"))
    config = minimal()
    if section == "":
        config[key] = raw[key]
    elif section == "vaults":
        config["vaults"] = [{"path": "/notes", key: raw["vaults"][0][key]}]
    else:
        config[section] = {key: raw[section][key]}
    parse(config)


@pytest.mark.parametrize(
    ("section", "cls"),
    [
        ("chunking", ChunkingConfig),
        ("context", ContextConfig),
        ("llm", LLMConfig),
        ("ask", AskConfig),
        ("query", QueryConfig),
        ("rerank", RerankConfig),
        ("daemon", DaemonConfig),
        ("vaults", VaultConfig),
    ],
)
def test_example_documents_every_setting(section: str, cls: type) -> None:
    documented = _example_keys()[section] | _commented_keys().get(section, set())
    # A vault's date rules are made of `date_key` and its .obsidian/ settings: no key of their own.
    made = {"dates"} if cls is VaultConfig else set()
    assert {f.name for f in dataclasses.fields(cls)} - made <= documented
    if cls is VaultConfig:
        assert "date_key" in documented


# --- re-ranking ---------------------------------------------------------------------------------


def test_the_chat_judge_is_the_default_reranker_and_waits_to_be_asked() -> None:
    cfg = parse(minimal())
    assert cfg.rerank == RerankConfig() and not cfg.query.rerank
    assert cfg.rerank.bounds(cfg.query) == (10, 600)
    cfg = parse(minimal(query={"rerank": True, "rerank_candidates": 4, "rerank_chars": 300}))
    assert cfg.query.rerank and cfg.rerank.bounds(cfg.query) == (4, 300)
    cfg = parse(minimal(query={"rerank_candidates": 4}, rerank={"candidates": 7}))
    assert cfg.rerank.bounds(cfg.query) == (7, 600)


def test_a_cross_encoder_is_used_unasked() -> None:
    raw = minimal(rerank={"backend": "http", "url": " http://gpu-box:8080/rerank "})
    cfg = parse(raw)
    assert cfg.query.rerank and cfg.rerank.url == "http://gpu-box:8080/rerank"
    assert cfg.rerank.bounds(cfg.query) == (20, 1600)
    assert not parse({**raw, "query": {"rerank": False}}).query.rerank
    assert parse(raw, {"KB_RERANK_API_KEY": "k"}).rerank.api_key == "k"
    cfg = parse(minimal(rerank={"backend": "onnx", "folder": "models/minilm", "chars": 900}))
    assert cfg.rerank.folder == BASE / "models" / "minilm"
    assert cfg.query.rerank and cfg.rerank.bounds(cfg.query) == (20, 900)


@pytest.mark.parametrize(
    ("rerank", "says"),
    [
        ({"backend": "colbert"}, "config key 'rerank.backend' must be one of chat, http, onnx"),
        ({"backend": "http"}, "config key 'rerank.url' must be the http(s) address of a /rerank"),
        ({"backend": "http", "url": "localhost:8080/rerank"}, "config key 'rerank.url' must be"),
        ({"backend": "onnx", "folder": " "}, "config key 'rerank.folder' is required with"),
        ({"style": "cohere"}, "config key 'rerank.style' must be one of jina, tei"),
        ({"candidates": 0}, "config key 'rerank.candidates' must be a whole number at least 1"),
        ({"chars": 1.5}, "config key 'rerank.chars' must be an integer"),
        ({"timeout": 0}, "config key 'rerank.timeout' must be a number above 0"),
        ({"backend": "http", "url": "http://h/rerank", "retries": 2}, "unknown config key 're"),
    ],
)
def test_bad_rerank_settings_are_one_line(rerank: dict[str, Any], says: str) -> None:
    assert error(minimal(rerank=rerank)).startswith(says)


# --- the daemon and conflict copies -------------------------------------------------------------


def test_daemon_defaults_and_values() -> None:
    assert parse(minimal()).daemon == DaemonConfig()
    cfg = parse(minimal(daemon={"debounce": 0.2, "max_delay": 2, "polling": True}))
    assert cfg.daemon.debounce == 0.2 and cfg.daemon.max_delay == 2.0 and cfg.daemon.polling


@pytest.mark.parametrize(
    ("daemon", "key"),
    [
        ({"debounce": 0}, "daemon.debounce"),
        ({"debounce": 5, "max_delay": 1}, "daemon.max_delay"),
        ({"reconcile_jitter": 1.5}, "daemon.reconcile_jitter"),
        ({"max_pending": -1}, "daemon.max_pending"),
        ({"polling": "yes"}, "daemon.polling"),
        ({"interval": 5}, "daemon.interval"),
    ],
)
def test_bad_daemon_values_name_the_key(daemon: dict[str, Any], key: str) -> None:
    assert f"'{key}'" in error(minimal(daemon=daemon))


def test_daemon_polling_env() -> None:
    assert parse(minimal(), {"KB_DAEMON_POLLING": "true"}).daemon.polling
    assert not parse(minimal(daemon={"polling": True}), {"KB_DAEMON_POLLING": "0"}).daemon.polling
    with pytest.raises(ConfigError, match="KB_DAEMON_POLLING"):
        parse(minimal(), {"KB_DAEMON_POLLING": "maybe"})


@pytest.mark.parametrize(
    "rel",
    [
        "a/Note.sync-conflict-20240101-120000-ABCDEFG.md",
        "Note (Conflicted copy MacBook 202401011200).md",
        "Note (Alex Doe's conflicted copy 2024-01-01).md",
    ],
)
def test_conflict_copies_ignored_unless_configured(rel: str) -> None:
    ignoring = parse(minimal()).vaults[0]
    indexing = parse({**minimal(), "vaults": [{"path": "/n", "conflicts": "index"}]}).vaults[0]
    assert ignoring.is_ignored(rel) and not indexing.is_ignored(rel)
    assert not ignoring.is_ignored("Conflicts in the team.md")


def test_bad_conflicts_mode() -> None:
    assert "'vaults[0].conflicts'" in error(
        {**minimal(), "vaults": [{"path": "/n", "conflicts": "x"}]}
    )


def test_an_empty_data_dir_is_an_error_not_the_default() -> None:
    assert error(minimal(data_dir="")).startswith("config key 'data_dir' is empty: name a folder")
    assert parse(minimal(data_dir="kb")).data_dir == BASE / "kb"


# --- every value checked at the one door --------------------------------------------------------


def _example_values() -> dict[tuple[str, str], Any]:
    """Every key of the example file, commented ones too, with its value there."""
    text = re.sub(r"(?m)^# ([a-z_]+ = .*)$", r"\1", EXAMPLE.read_text(encoding="utf-8"))
    raw = tomllib.loads(text)
    found: dict[tuple[str, str], Any] = {}
    for key, value in raw.items():
        if key == "vaults":
            found.update({("vaults", k): v for k, v in value[0].items()})
        elif isinstance(value, dict):
            found.update({(key, k): v for k, v in value.items()})
        else:
            found[("", key)] = value
    return found


def _with(section: str, key: str, value: Any) -> dict[str, Any]:
    config = minimal()
    if section == "":
        config[key] = value
    elif section == "vaults":
        config["vaults"] = [{"path": "/notes", key: value}]
    else:
        config[section] = {key: value}
    return config


def _named(section: str, key: str) -> str:
    return {"": key, "vaults": f"vaults[0].{key}"}.get(section, f"{section}.{key}")


_NUMBERS = [
    (s, k)
    for (s, k), v in _example_values().items()
    if isinstance(v, int | float) and not isinstance(v, bool)
]
_TEXTS = [(s, k) for (s, k), v in _example_values().items() if isinstance(v, str)]


@pytest.mark.parametrize(("section", "key"), _NUMBERS)
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf"), -5, 0, 10**18, 1e300])
def test_every_number_is_finite_and_in_its_range(section: str, key: str, bad: Any) -> None:
    if bad == 0 and key in ("retries", "first_chunks", "last_chunks", "timeout_per_token"):
        bad = -1  # 0 is a fine number of retries, or of seconds more per token
    if bad == 0 and key in ("vector_weight", "reconcile_jitter"):
        bad = 1.5
    message = error(_with(section, key, bad))
    assert message.startswith(f"config key '{_named(section, key)}' must be"), message


@pytest.mark.parametrize(("section", "key"), _TEXTS)
def test_no_text_holds_a_nul_character(section: str, key: str) -> None:
    message = error(_with(section, key, "a\x00b"))
    assert message == f"config key '{_named(section, key)}' holds a NUL character"


@pytest.mark.parametrize("key", ["personal", "ignore"])
def test_no_glob_holds_a_nul_character(key: str) -> None:
    message = error(_with("vaults", key, ["ok/**", "a\x00b"]))
    assert message == f"config key 'vaults[0].{key}' holds a NUL character"


@pytest.mark.parametrize(
    ("env", "name"),
    [
        ({"KB_LLM_CONCURRENCY": "100000"}, "KB_LLM_CONCURRENCY"),
        ({"KB_LLM_CONCURRENCY": "\u00b2"}, "KB_LLM_CONCURRENCY"),
    ],
)
def test_a_number_from_the_environment_is_in_range_too(env: dict[str, str], name: str) -> None:
    assert error(minimal(), env).startswith(f"environment variable {name} must be")
