"""`kb init`: a config written for a vault, from proposals the user accepts."""

from __future__ import annotations

import datetime as dt
import os
import tomllib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from kb.cli.render import shown
from kb.cli.shared import Options, fail, stderr, stdout
from kb.config import Config, load_config, read_config_text
from kb.errors import EXIT_ERROR, KbError
from kb.models.providers import BUILT_IN, choices
from kb.models.providers import provider as spec_of
from kb.terminal import printable

if TYPE_CHECKING:
    from kb.services import init_proposals


def init_command(
    ctx: typer.Context,
    vault: Annotated[
        Path, typer.Argument(help="The vault's folder (default: this one).", show_default=False)
    ] = Path("."),
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Accept every proposal.")] = False,
    owner: Annotated[
        str | None, typer.Option("--owner", help="The vault owner's full name.")
    ] = None,
    personal: Annotated[
        list[str] | None,
        typer.Option("--personal", help="A personal-folder glob (repeatable), with the proposals."),
    ] = None,
    ignore: Annotated[
        list[str] | None, typer.Option("--ignore", help="A glob never indexed (repeatable).")
    ] = None,
    # The built-in names alone: an installed provider's are read only when one is asked for.
    provider: Annotated[
        str, typer.Option("--provider", help=f"{choices(list(BUILT_IN))}.")
    ] = "ollama",
    name: Annotated[
        str | None, typer.Option("--name", help="The vault's name (default: its folder's).")
    ] = None,
    add: Annotated[
        bool, typer.Option("--add", help="Add this vault to the existing config.")
    ] = False,
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing config.")] = False,
) -> None:
    """Write a config for a vault: the owner, personal folders, what to skip, the models."""
    from kb.locations import find_config_file
    from kb.services import init_proposals

    options: Options = ctx.obj
    target = find_config_file(options.config)
    out = stdout()
    try:
        start = _start(
            target,
            vault.expanduser().resolve(),
            provider,
            name,
            owner,
            yes=yes,
            add=add,
            globs=(personal or (), ignore or ()),
        )
    except KbError as exc:
        raise fail(str(exc)) from None
    chosen = list(_chosen(init_proposals.personal_proposals(start.survey), yes))
    chosen += [init_proposals.Proposal(g, "given with --personal") for g in personal or ()]
    out.print("skipped      " + init_proposals.ALWAYS_SKIPPED)
    for proposal in init_proposals.ignore_proposals(start.survey.settings):
        out.print(f"  {shown(proposal.glob)}  ({shown(proposal.reason)}, followed at each sync)")
    for glob in ignore or ():
        out.print(f"  {shown(glob)}  (given with --ignore)")
    choices = init_proposals.Choices(
        owner=start.owner,
        name=start.name,
        path=start.path,
        personal=tuple(chosen),
        ignore=tuple(ignore or ()),
        followed=tuple(start.survey.settings.lines()),
        provider=start.provider,
    )
    text = (
        start.existing.rstrip("\n") + "\n" + init_proposals.vault_text(choices)
        if add and start.existing is not None
        else init_proposals.config_text(choices, dt.date.today())
    )
    _write(target, text, start.existing, replace=not add, force=force)
    out.print(f"wrote        {shown(str(target))}")
    _next_steps("" if options.config is None else f" --config {shown(str(target))}")


@dataclass(frozen=True)
class _Start:
    """What `kb init` knows before the personal folders are chosen."""

    path: Path
    name: str
    owner: str
    provider: str
    existing: str | None  # the config file's text, when there is one
    survey: init_proposals.Survey


def _start(
    target: Path,
    path: Path,
    provider: str,
    name: str | None,
    owner: str | None,
    *,
    yes: bool,
    add: bool,
    globs: tuple[Sequence[str], Sequence[str]],
) -> _Start:
    """The vault, its name and owner (asked unless given or --yes), and its survey; a
    KbError when the options cannot make a config. `globs`: --personal's and --ignore's."""
    from kb.config import VaultConfig
    from kb.services import init_proposals

    spec_of(provider, key="--provider")
    existing = read_config_text(target) if target.exists() else None
    configured = load_config(target).vaults if add and existing is not None else ()
    if add and existing is None:
        raise KbError(f"--add: there is no config at {target} to add to")
    personal, ignore = globs
    init_proposals.refuse_globs("--ignore", ignore)
    init_proposals.refuse_globs("--personal", personal)
    init_proposals.refuse_vault(path, configured)
    if name is not None and any(v.name == name for v in configured):
        raise KbError(f"a vault is already named '{name}': pass another --name")
    held = {v.name: v.folder for v in configured}
    indexed = _indexed(load_config(target) if add and existing is not None else None)
    vault_name = init_proposals.vault_name(os.path.realpath(path), indexed | held, name)
    out = stdout()
    out.print(f"vault        {shown(str(path))} (named '{shown(vault_name)}')")
    found = [] if add else init_proposals.owner_names(*init_proposals.names_on_this_machine())
    owner_name = "" if add else _owner(owner, yes, found)
    if owner_name:
        out.print(f"owner        {shown(owner_name)}")
    survey = init_proposals.survey(VaultConfig(vault_name, path, ignore=tuple(ignore)))
    return _Start(path, vault_name, owner_name, provider, existing, survey)


def _indexed(config: Config | None) -> dict[str, str | None]:
    """The vaults the index this config will use already holds (name → folder): the
    config's database (with --add), else the one KB_DATABASE_URL or the data dir name. An
    index not made yet holds none, and is not made here; one that cannot be read, none."""
    import psycopg

    from kb import db
    from kb.container import open_store
    from kb.errors import DatabaseError
    from kb.locations import default_data_dir

    if config is not None:
        url, data_dir = config.database_url, config.data_dir
    else:
        url = os.environ.get("KB_DATABASE_URL", "")
        data_dir = Path(os.environ.get("KB_DATA_DIR") or default_data_dir())
    if not url and not (data_dir.expanduser() / "pgdata").is_dir():
        return {}
    try:
        with open_store(db.database_url(url, data_dir), max_connections=1) as store:
            return {v.name: v.folder for v in store.vaults.stored()}
    except (DatabaseError, psycopg.Error):
        return {}


def _write(target: Path, text: str, existing: str | None, *, replace: bool, force: bool) -> None:
    """Write the config `text` once it reads as kb will read it and its models answer; an
    existing config is replaced only with --force (the changes shown otherwise)."""
    from kb.config import parse_config
    from kb.services import init_proposals

    try:
        # Read as kb will read it, the environment's overrides (OLLAMA_HOST) included.
        config = parse_config(tomllib.loads(text), base_dir=target.parent, env=dict(os.environ))
    except (KbError, tomllib.TOMLDecodeError) as exc:
        raise fail(f"the config would not be valid: {exc}") from None
    _check_models(config)
    if existing is not None and replace and not force:
        stderr().print(f"{shown(str(target))} exists; --force overwrites it. It would change:")
        for line in init_proposals.changes(existing, text, target):
            stderr().print(printable(line), markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(EXIT_ERROR)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")


def _next_steps(at: str) -> None:
    """What to run next, with the same --config (`at`)."""
    out = stdout()
    out.print(f"next         kb{at} index", soft_wrap=True)
    out.print(f'then         kb{at} query "…"', soft_wrap=True)
    out.print(f"or browse    kb{at} serve, then http://127.0.0.1:8766/", soft_wrap=True)
    out.print(
        f"in sync      kb{at} daemon keeps the index in sync; deploy/ has service files "
        "to run it (kb.service, kb.daemon.plist)",
        soft_wrap=True,
    )


def _owner(given: str | None, yes: bool, found: list[str]) -> str:
    """The owner's name: given, proposed (and asked, unless --yes), or asked for."""
    if given is not None:
        name = given.strip()
    elif yes:
        if not found:
            raise KbError("no owner name found (git user.name, the account's name): pass --owner")
        name = found[0]
    else:
        name = typer.prompt("Your full name", default=found[0] if found else None).strip()
    if not name:
        raise KbError("the owner's name is empty: pass --owner NAME")
    return name


def _chosen(
    proposals: Sequence[init_proposals.Proposal], yes: bool
) -> Iterator[init_proposals.Proposal]:
    """The personal folders proposed, each shown with its reason, and those accepted."""
    if not proposals:
        stdout().print("personal     none proposed (--personal GLOB names one)")
    for proposal in proposals:
        line = f"personal     {shown(proposal.glob)}  ({shown(proposal.reason)})"
        if yes:
            stdout().print(line)
            yield proposal
        elif typer.confirm(line + "?", default=True):
            yield proposal


def _check_models(config: Config) -> None:
    """Whether the model server has the chat and embedding models; how to fix what it lacks,
    without failing the init."""
    from kb.errors import LLMError
    from kb.llm import served_models
    from kb.services import init_proposals

    llm = config.llm
    spec = spec_of(llm.provider)
    if not spec.has_server:
        note = f" ({spec.note})" if spec.note else ""
        stdout().print(f"models       the {llm.provider} provider: no model server{note}")
        return
    # One check a server: the chat and embedding models may be served apart.
    wanted: dict[str, list[str]] = {}
    for host, model in ((llm.chat_host, llm.chat_model), (llm.embed_host, llm.embed_model)):
        wanted.setdefault(host, []).append(model)
    for host, models in wanted.items():
        served: list[str] | LLMError
        try:
            served = served_models(llm, host)
        except LLMError as exc:
            served = exc
        check = init_proposals.model_check(llm.provider, host, models, served)
        if check.ready:
            stdout().print(f"models       {', '.join(models)} ready at {shown(host)}")
            continue
        state = "missing " + ", ".join(check.missing) if check.reachable else "not reachable"
        stdout().print(f"models       {shown(host)}: {state}; to fix:")
        for fix in check.fixes:
            stdout().print(f"  {printable(fix)}", markup=False, highlight=False, soft_wrap=True)
