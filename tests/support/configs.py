"""A test's configuration, one way: the same sections made into kb's Config for parts run in
the test's process (`make_config`), or written as the file a whole `kb` process reads
(`write_config`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kb.config import Config, parse_config

OWNER = "Alex Doe"
# The offline fakes, as a config names them.
FAKE_LLM: dict[str, Any] = {
    "provider": "fake",
    "chat_model": "fake-chat",
    "embed_model": "hash-256",
}
# The file and chunk summaries (`context.writes = ["summaries"]`): a setting, no longer the
# default, and what the tests of their prompts, batches, rewrites and fallbacks read.
SUMMARIES: dict[str, Any] = {"writes": ["summaries"], "passages": "none"}


def summaries_config(vault_path: Path, **sections: Any) -> Config:
    """make_config at the summaries' setting (SUMMARIES), with `sections` over it."""
    context = {**SUMMARIES, **sections.pop("context", {})}
    return make_config(vault_path, context=context, **sections)


def make_config(vault_path: Path, **sections: Any) -> Config:
    """One vault "v" with Alex's notes personal, on the fakes (two at a time), `sections`
    over it: a section's keys are merged into the default's, anything else replaces it."""
    llm = {**FAKE_LLM, "concurrency": 2}
    raw = _raw(vault_path, {"llm": llm}, sections, name="v", personal=("Alex/**",))
    return parse_config(raw, base_dir=vault_path.parent, env={})


def write_config(
    path: Path,
    vault_path: Path,
    *,
    name: str = "v",
    personal: tuple[str, ...] = ("Alex/**",),
    **sections: Any,
) -> Path:
    """The config file at `path` for one vault `name` (its `personal` patterns) on the fakes,
    `sections` over it as make_config merges them (`owner_name="Ana"` replaces the owner)."""
    raw = _raw(vault_path, {"llm": dict(FAKE_LLM)}, sections, name=name, personal=personal)
    path.write_text(_toml(raw))
    return path


def _raw(
    vault_path: Path,
    defaults: dict[str, Any],
    sections: dict[str, Any],
    *,
    name: str,
    personal: tuple[str, ...],
) -> dict[str, Any]:
    vault: dict[str, Any] = {"name": name, "path": str(vault_path)}
    if personal:
        vault["personal"] = list(personal)
    raw: dict[str, Any] = {"owner_name": OWNER, "vaults": [vault], **defaults}
    for key, value in sections.items():
        raw[key] = {**raw.get(key, {}), **value} if isinstance(value, dict) else value
    return raw


def _toml(raw: dict[str, Any], table: str = "") -> str:
    """`raw` as TOML: its plain keys, then a table per mapping and per list of mappings (JSON
    spells strings, numbers, booleans and lists of them as TOML does)."""
    lines = [
        f"{key} = {json.dumps(value)}"
        for key, value in raw.items()
        if not isinstance(value, dict) and not _tables(value)
    ]
    text = "\n".join(lines) + "\n" if lines else ""
    for key, value in raw.items():
        name = f"{table}.{key}" if table else key
        if isinstance(value, dict):
            text += f"\n[{name}]\n" + _toml(value, name)
        elif _tables(value):
            for item in value:
                text += f"\n[[{name}]]\n" + _toml(item, name)
    return text


def _tables(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)
