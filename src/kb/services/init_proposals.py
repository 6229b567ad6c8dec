"""`kb init`: what to propose for a vault, and the config that says it.

The proposals are pure functions over what was read: the owner's name (git's `user.name`,
the account's full name), the personal folders (the daily-notes folder, folders named like
journals, folders where most notes say "I"), what the vault's Obsidian settings leave out,
and what the model server lacks. Two small readers gather that data: `survey` (the vault)
and `names_on_this_machine`.
"""

from __future__ import annotations

import datetime as dt
import difflib
import os
import pwd
import re
import subprocess
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePath

from kb.config import VaultConfig, escaped, glob_problem
from kb.context.voices import FIRST_PERSON
from kb.errors import ConfigError, KbError, LLMError
from kb.models.providers import provider as spec_of
from kb.names import composed
from kb.vault import obsidian
from kb.vault.notes import read_note, scan_vault

# Folder names that say "my journal" in themselves.
_JOURNAL_NAMES = re.compile(
    r"^(?:journal|journals|journaling|diary|diaries|daily|dailies|daily notes|dailynotes|"
    r"days|log|logs|logbook|morning pages|reflections?)$",
    re.IGNORECASE,
)
# A note is written in the first person when this share of its words are "I", "me", "my"…
FIRST_PERSON_SHARE = 0.02
# A folder is proposed as personal when most of the notes read in it are, and enough of them.
MOST = 0.6
FEW = 3
# Notes read per folder, and characters per note: enough to tell a diary from a manual.
SAMPLE_NOTES = 40
SAMPLE_CHARS = 4000
_WORD = re.compile(r"[^\W\d_]+")


@dataclass(frozen=True)
class Folder:
    """A top-level folder of the vault, and how many of the notes read in it say "I"."""

    name: str
    notes: int
    first_person: int


@dataclass(frozen=True)
class Survey:
    """What `kb init` read of a vault."""

    folders: tuple[Folder, ...]
    settings: obsidian.Settings


@dataclass(frozen=True)
class Proposal:
    """A glob to put in the config, and why it is proposed."""

    glob: str
    reason: str


def first_person(text: str) -> bool:
    """Whether a note is written in the first person: enough of its words are "I", "my"…"""
    words = len(_WORD.findall(text))
    said = len(FIRST_PERSON.findall(text))
    return said >= FEW and said >= FIRST_PERSON_SHARE * words


def owner_names(git_name: str | None, account_name: str | None) -> list[str]:
    """The owner's names to propose, best first, none twice: git's, then the account's."""
    names = [n.strip() for n in (git_name, account_name) if n and n.strip()]
    return list(dict.fromkeys(names))


def personal_proposals(survey: Survey) -> list[Proposal]:
    """The folders to propose as the owner's own, each with its reason."""
    found: dict[str, str] = {}
    daily = survey.settings.daily
    if daily is not None and daily.folder:
        found[composed(daily.folder)] = f"the daily-notes folder ({survey.settings.daily_from})"
    templates = composed(survey.settings.templates or "")
    for folder in survey.folders:
        name = composed(folder.name)
        if name == templates or name in found:
            continue
        if _JOURNAL_NAMES.match(folder.name):
            found[name] = "named like a journal"
        elif folder.notes >= FEW and folder.first_person >= MOST * folder.notes:
            found[name] = (
                f"{folder.first_person} of {folder.notes} notes read are in the first person"
            )
    # A folder's name, not a pattern: "Days [old]" is that folder, not "Days o".
    return [Proposal(f"{escaped(name)}/**", reason) for name, reason in found.items()]


def ignore_proposals(settings: obsidian.Settings) -> list[Proposal]:
    """What the vault's Obsidian settings leave out; kb follows them at each sync, so they
    are not written as ignore globs (an edit in Obsidian is taken up as it is)."""
    return [Proposal(glob, reason) for glob, reason in settings.ignored()]


ALWAYS_SKIPPED = "dot-folders (.obsidian/, .trash/, .git/) are always skipped"


@dataclass(frozen=True)
class ModelCheck:
    """What the model server has of the configured models, and how to fix what it lacks."""

    reachable: bool
    missing: tuple[str, ...]
    fixes: tuple[str, ...]

    @property
    def ready(self) -> bool:
        return self.reachable and not self.missing


def model_check(
    provider: str, host: str, wanted: Sequence[str], served: Sequence[str] | LLMError
) -> ModelCheck:
    """The models `wanted` against what the server `served` (or why it could not be asked),
    with the fixes the provider's spec words."""
    spec = spec_of(provider)
    if isinstance(served, LLMError):
        return ModelCheck(False, tuple(wanted), spec.down_fixes(host, wanted))
    missing = tuple(m for m in wanted if not _served(m, served))
    return ModelCheck(True, missing, tuple(spec.missing_fix(m) for m in missing))


def _served(model: str, served: Iterable[str]) -> bool:
    # Ollama names a model without a tag by its ":latest".
    names = set(served)
    return model in names or (":" not in model and f"{model}:latest" in names)


@dataclass(frozen=True)
class Choices:
    """What the config written by `kb init` says of one vault and its owner."""

    owner: str
    name: str
    path: Path
    personal: tuple[Proposal, ...]
    ignore: tuple[str, ...]
    followed: tuple[str, ...]  # the Obsidian settings followed, one a line (comments)
    provider: str


def config_text(choices: Choices, today: dt.date) -> str:
    """A short commented config: the keys `kb init` set, a pointer for the rest."""
    lines = [
        f"# kb configuration, written by `kb init` on {today.isoformat()}.",
        "# Every other key, with its default, is described in config.example.toml.",
        "",
        "# The vault owner's full name: first-person text in personal folders is theirs.",
        f"owner_name = {_toml(choices.owner)}",
        "",
        "[llm]",
        f"provider = {_toml(choices.provider)}",
    ]
    if example := spec_of(choices.provider).example_host:
        lines.append(f"host = {_toml(example)}  # the server's address")
    return "\n".join(lines) + "\n" + vault_text(choices)


def vault_text(choices: Choices) -> str:
    """One [[vaults]] table: what `kb init --add` appends to a config."""
    lines = [
        "",
        "[[vaults]]",
        f"name = {_toml(choices.name)}",
        f"path = {_toml(str(choices.path))}",
    ]
    if choices.personal:
        lines.append("# The owner's own folders, written in their voice:")
        lines.append("personal = [")
        lines += [f"  {_toml(p.glob)},  # {p.reason}" for p in choices.personal]
        lines.append("]")
    else:
        lines.append("personal = []")
    lines.append(f"ignore = [{', '.join(_toml(g) for g in choices.ignore)}]")
    if choices.followed:
        lines.append("# Followed from .obsidian/ at each sync (obsidian = false turns it off):")
        lines += [f"#   {line}" for line in choices.followed]
    return "\n".join(lines) + "\n"


def _toml(value: str) -> str:
    # A TOML basic string is a JSON string for every character kb writes.
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + "".join(c if c.isprintable() else f"\\u{ord(c):04x}" for c in escaped) + '"'


def changes(old: str, new: str, path: Path) -> list[str]:
    """What writing `new` over `old` would change, as a unified diff."""
    return list(
        difflib.unified_diff(
            old.splitlines(), new.splitlines(), str(path), f"{path} (new)", lineterm=""
        )
    )


def refuse_globs(option: str, globs: Iterable[str]) -> None:
    """ConfigError, in one line, for a glob given on the command line that cannot be
    compiled: checked before the vault is read with it."""
    for glob in globs:
        if (problem := glob_problem(glob)) is not None:
            raise ConfigError(f"{option} has an invalid glob {glob!r}: {problem}")


def vault_name(folder: str, held: Mapping[str, str | None], given: str | None = None) -> str:
    """The name of a new vault at `folder` (resolved), given the names the index and the
    config already hold (name → folder, None where not known): `given` (--name), refused
    where it is another folder's; else the folder's own name, the name the index holds it
    under, or where another folder holds the name, its parent's name joined to it
    ("home-notes"), then a number. Two folders under one name would take each other's notes
    (kb.vault.sync_plan.vault_refusal)."""
    path = PurePath(folder)
    if given is not None:
        if held.get(given, folder) not in (None, folder):
            raise ConfigError(
                f"vault '{given}' is {held[given]} in the index: give {folder} another --name"
            )
        return given
    same = [n for n, f in held.items() if f == folder]
    if same:
        return same[0]
    base = path.name or "vault"
    parent = path.parent.name
    candidates = [
        base,
        *([f"{parent}-{base}"] if parent else []),
        *(f"{base}-{i}" for i in range(2, 1000)),
    ]
    return next(c for c in candidates if c not in held)


def refuse_vault(path: Path, configured: Sequence[VaultConfig]) -> None:
    """ConfigError, in one line, for a folder that cannot be a new vault: not a folder, not
    readable, inside or around a vault already configured."""
    if not path.is_dir():
        raise ConfigError(f"{path} is not a folder")
    try:
        with os.scandir(path) as entries:
            next(entries, None)
    except OSError as exc:
        raise ConfigError(f"{path} cannot be read: {exc.strerror or exc}") from None
    real = Path(os.path.realpath(path))
    for vault in configured:
        other = Path(os.path.realpath(vault.path))
        if real == other:
            raise ConfigError(f"{path} is already configured as vault '{vault.name}'")
        if other in real.parents:
            raise ConfigError(f"{path} is inside vault '{vault.name}' ({vault.path})")
        if real in other.parents:
            raise ConfigError(f"{path} contains vault '{vault.name}' ({vault.path})")


# -- the readers ----------------------------------------------------------------------------------


def survey(vault: VaultConfig) -> Survey:
    """A vault's Obsidian settings, and a sample of each top-level folder's notes: how many
    of them are in the first person. Its ignore rules and Obsidian's exclusions apply."""
    seen, settings = obsidian.followed(vault)
    read: Counter[str] = Counter()
    said: Counter[str] = Counter()
    for note in scan_vault(seen, unlisted=[]):
        folder, slash, _ = note.path.partition("/")
        if not slash or read[folder] >= SAMPLE_NOTES:
            continue
        try:
            text = read_note(seen, note.path)[:SAMPLE_CHARS].decode("utf-8", "replace")
        except (OSError, KbError):
            continue
        read[folder] += 1
        said[folder] += first_person(text)
    folders = tuple(Folder(name, read[name], said[name]) for name in sorted(read))
    return Survey(folders, settings)


def names_on_this_machine() -> tuple[str | None, str | None]:
    """(git's user.name, the account's full name from its passwd entry), each if any."""
    try:
        done = subprocess.run(
            ["git", "config", "--get", "user.name"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
        git_name = done.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        git_name = None
    try:
        gecos = pwd.getpwuid(os.getuid()).pw_gecos
    except (KeyError, OSError):
        gecos = ""
    # The full name is the gecos field's first part ("Ana Lima,Room 1,,").
    return git_name, gecos.split(",")[0].strip() or None
