"""What a sync must do, decided from data alone: stored rows x notes on disk → actions.

Pure steps around the one piece of I/O between them (reading and hashing files):

1. `pair`: the stored rows and the notes on disk, walked side by side in path order, so that
   a full sync of a large vault keeps only the notes not `unchanged` on their stat.
2. `to_read`: which of the others must be read and hashed, and which are new.
3. `decide`: from those hashes, which notes are unchanged (with a new size or mtime to
   record), moved (same content, new path: re-keyed, no model call), or to index, and
   which rows lost their file.

The indexer carries the plan out; these functions are tested without a database.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeAlias, TypeVar

from kb.dates import DateRules
from kb.vault.notes import OnDisk, Unlisted

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Stored:
    """What the index knows of a note, enough to decide whether to look closer."""

    path: str
    content_hash: str
    size: int
    mtime_ns: int
    personal: bool
    context_build: str


@dataclass(frozen=True)
class Rules:
    # Index every note again, ignoring stat and hash (`kb reindex`).
    force: bool = False
    # A full scan trusts an unchanged size and mtime; a file a watcher named is hashed, since
    # a sync tool may replace a note and keep its old mtime.
    trust_stat: bool = True
    # How contexts are built now, of notes not personal and of personal ones (the owner's
    # name shapes only theirs): a note built another way is indexed again (from cache).
    build: str = ""
    personal_build: str = ""
    # Notes holding another model's rejected outputs: they deserve this model's try.
    retry: frozenset[str] = frozenset()
    # How the vault's notes are dated now: a daily note dated by another format is rebuilt.
    dates: DateRules = field(default_factory=DateRules)

    def built(self, personal: bool, path: str) -> str:
        """How a note with this personal flag, at this path, is built now."""
        return (self.personal_build if personal else self.build) + self.dates.build_part(path)

    def stale(self, old: Stored) -> bool:
        return (
            self.force
            or old.context_build != self.built(old.personal, old.path)
            or old.path in self.retry
        )


@dataclass(frozen=True)
class Read:
    """A note that was read, and the hash of its bytes."""

    file: OnDisk
    digest: str


@dataclass(frozen=True)
class Move:
    source: str
    target: OnDisk


@dataclass(frozen=True)
class Plan:
    touch: tuple[OnDisk, ...]  # same content: only its size and mtime are recorded
    moves: tuple[Move, ...]
    index: tuple[OnDisk, ...]
    delete: tuple[str, ...]  # rows whose file is gone


class _Keyed(Protocol):
    @property
    def path(self) -> str: ...


K = TypeVar("K", bound=_Keyed)


def pair(
    stored: Iterable[Stored], on_disk: Iterable[OnDisk], unlisted: Sequence[Unlisted] = ()
) -> Iterator[tuple[Stored | None, OnDisk | None]]:
    """Each path of either side once, with its row and its note (None where one is
    missing), but for the rows with no note that are `kept`. Both must come in path order
    (code point order: `ORDER BY path COLLATE "C"` and `scan_vault` give it), or a note
    would look deleted and new at once: ValueError.

    `unlisted` may grow as `on_disk` is read: a scan reports a folder when it reaches it,
    before any later path, so it is known before a row under it is found without a note.
    """
    rows, files = iter(stored), iter(on_disk)
    row, file = _next(rows, None), _next(files, None)
    while row is not None and file is not None:
        if row.path < file.path:
            if not kept(row.path, unlisted):
                yield row, None
            row = _next(rows, row.path)
        elif file.path < row.path:
            yield None, file
            file = _next(files, file.path)
        else:
            yield row, file
            row, file = _next(rows, row.path), _next(files, file.path)
    while row is not None:
        if not kept(row.path, unlisted):
            yield row, None
        row = _next(rows, row.path)
    while file is not None:
        yield None, file
        file = _next(files, file.path)


def _next(items: Iterator[K], after: str | None) -> K | None:
    item = next(items, None)
    if item is not None and after is not None and item.path <= after:
        raise ValueError(f"paths out of order: {item.path!r} came after {after!r}")
    return item


def kept(path: str, unlisted: Iterable[Unlisted]) -> bool:
    """Whether a row whose note was not found is kept as it is: it lies under a folder that
    could not be read, where its note may be still. Neither deleted nor a move's source,
    it syncs as usual once the folder can be read again."""
    return any(path.startswith(u.path) for u in unlisted)


def unchanged(old: Stored, new: OnDisk, rules: Rules) -> bool:
    """Whether a note is taken as it is stored on its stat alone, without reading it."""
    return (
        rules.trust_stat
        and not rules.stale(old)
        and (old.size, old.mtime_ns, old.personal) == (new.size, new.mtime_ns, new.personal)
    )


def to_read(
    stored: Mapping[str, Stored], on_disk: Sequence[OnDisk], rules: Rules
) -> tuple[list[OnDisk], list[OnDisk]]:
    """(notes to read and hash, new notes to index), of the notes `pair` did not find
    `unchanged` (and of the rows beside them, with those that lost their file).

    A note with no row at its path is read and hashed first only where it may be a move:
    where a stored row lost its file, or among a watcher's files (whose move may come from a
    folder it did not name). Otherwise (a first index, notes added) it is only read when it
    is indexed.
    """
    present = {f.path for f in on_disk}
    may_move = not rules.force and (not rules.trust_stat or any(p not in present for p in stored))
    read: list[OnDisk] = []
    new: list[OnDisk] = []
    for f in on_disk:
        (new if f.path not in stored and not may_move else read).append(f)
    return read, new


def new_hashes(stored: Mapping[str, Stored], read: Sequence[Read]) -> list[str]:
    """Hashes of notes with no row at their path: a row elsewhere with one of these hashes
    whose file is gone is where the note moved from."""
    return [r.digest for r in read if r.file.path not in stored]


def decide(
    stored: Mapping[str, Stored],
    read: Sequence[Read],
    present: Collection[str],
    rules: Rules,
    elsewhere: Mapping[str, Stored] | None = None,
    new: Sequence[OnDisk] = (),
    unlisted: Sequence[Unlisted] = (),
) -> Plan:
    """The plan for the notes read, given every path still on disk (`present`); the `new`
    notes `to_read` left unread are indexed.

    `elsewhere`: rows outside `stored` whose file is gone, with a hash in `new_hashes`; a
    watcher may name a move's destination apart from its source. Rows under `unlisted`
    folders are `kept`.
    """
    vanished = {p: d for p, d in stored.items() if p not in present and not kept(p, unlisted)}
    others = dict(elsewhere or {})
    touch: list[OnDisk] = []
    moves: list[Move] = []
    index: list[OnDisk] = []
    for r in read:
        f = r.file
        old = stored.get(f.path)
        if (
            old is not None
            and not rules.stale(old)
            and (old.personal, old.content_hash) == (f.personal, r.digest)
        ):
            touch.append(f)
            continue
        source = None
        if not rules.force and old is None:
            source = _same_note(vanished, r, rules) or _same_note(others, r, rules)
        if source is None:
            index.append(f)
        else:
            moves.append(Move(source.path, f))
            vanished.pop(source.path, None)
            others.pop(source.path, None)
    return Plan(tuple(touch), tuple(moves), (*index, *new), tuple(vanished))


def groups(items: Sequence[T], most: int, workers: int) -> list[Sequence[T]]:
    """`items` cut in order into groups of at most `most`, and small enough that each of
    `workers` gets one where there are enough items (a few notes are not all left to one)."""
    size = max(1, min(most, -(-len(items) // max(1, workers))))
    return [items[i : i + size] for i in range(0, len(items), size)]


def _same_note(rows: Mapping[str, Stored], r: Read, rules: Rules) -> Stored | None:
    """A row of the same note, to move: one that would be indexed again where it is (built
    another way) is indexed at its new path instead."""
    return next(
        (
            d
            for d in rows.values()
            if d.content_hash == r.digest
            and d.personal == r.file.personal
            and not rules.stale(d)
            and rules.dates.named_day(d.path) == rules.dates.named_day(r.file.path)
        ),
        None,
    )


# -- vaults ---------------------------------------------------------------------------------------

# The vaults a read is kept to: None for every vault (no filter), else these names, none of
# them for no vault at all (a configuration whose every name is another folder's vault).
VaultFilter: TypeAlias = tuple[str, ...] | None


@dataclass(frozen=True)
class StoredVault:
    """A vault the index holds rows of."""

    name: str
    folder: str | None  # the resolved folder it was last synced from (None: not known yet)
    notes: int
    # The config file that last synced it (None: not known, or a config read from no file),
    # and the settings its notes were built with (None: not known yet).
    config: str | None = None
    settings: Mapping[str, str] | None = None


@dataclass(frozen=True)
class VaultClaim:
    """A vault as this configuration names it."""

    name: str
    folder: str  # resolved
    config: str | None  # the config file, resolved (None: read from no file)
    settings: Mapping[str, str]  # what its notes are built with (`vault_settings`)


def vault_settings(
    personal: Sequence[str],
    ignore: Sequence[str],
    others: Mapping[str, str],
) -> dict[str, str]:
    """What a vault's notes are built with, by the name a refusal gives each: the notes two
    configurations would build otherwise, each sync would build again."""
    return {"personal": ", ".join(personal), "ignore": ", ".join(ignore), **others}


def vault_refusal(
    claim: VaultClaim,
    stored: Sequence[StoredVault],
    held: Collection[str],
    present: Collection[str],
) -> str | None:
    """Why this configuration must not sync its vault, in one line, or None.

    `held`: the stored vaults another configuration still names (its file there, naming
    the vault at its folder); `present`: those whose folder is still a folder. A
    configuration never takes rows another one names:

    - the name held for another folder that another configuration names, or that is still
      there and was synced by another configuration, is another vault (the same name given
      twice); a folder gone is a vault moved, and its rows go with it, as do a vault's when
      its own config points it elsewhere;
    - the same vault held by another configuration with other settings would be built
      again by each in turn: refused, as the user would want to choose;
    - a folder another configuration holds under another name would be indexed twice.
    """
    mine = next((v for v in stored if v.name == claim.name), None)
    if mine is not None and mine.folder is not None and mine.folder != claim.folder:
        # Its own config pointed elsewhere is the user's to do; another's, or one not known
        # (a vault synced before 025), is refused while its folder is there.
        if mine.name in held or (mine.name in present and mine.config != claim.config):
            by = f" (by {mine.config})" if mine.config and mine.config != claim.config else ""
            return (
                f"vault '{claim.name}' is {mine.folder} in the index{by}, {claim.folder} in"
                " this config: give this one another name (`name` in [[vaults]], or"
                f" `kb init --name`), or `kb forget {claim.name}` if {mine.folder} is not to"
                " be searched"
            )
        return None
    if (
        mine is not None
        and mine.name in held
        and mine.config != claim.config
        and mine.settings is not None
        and mine.settings != claim.settings
    ):
        keys = sorted(
            k
            for k in {*mine.settings, *claim.settings}
            if mine.settings.get(k) != claim.settings.get(k)
        )
        return (
            f"vault '{claim.name}' ({claim.folder}) is also indexed by {mine.config} with"
            f" other settings ({', '.join(keys)}): give both configs the same, or keep the"
            " vault in one of them; each would build the other's notes again at every sync"
        )
    if mine is None or not mine.notes:
        for other in stored:
            if other.name != claim.name and other.folder == claim.folder and other.name in held:
                return (
                    f"folder {claim.folder} is vault '{other.name}' of {other.config}, and"
                    f" '{claim.name}' in this config: name it '{other.name}' here too (`kb init"
                    f" --name {other.name}`), or `kb forget {other.name}` first to index it as"
                    f" '{claim.name}'"
                )
    return None


def vault_renames(
    configured: Mapping[str, str], stored: Sequence[StoredVault], held: Collection[str] = ()
) -> dict[str, str]:
    """Old name → new name: a configured vault (name → resolved folder) holding no rows takes
    over the rows of the one stored vault no config names that was last synced from its
    folder, as a renamed note keeps its rows: nothing is read or sent to a model again.
    A vault another configuration still names (`held`) is its, never taken."""
    have = {v.name for v in stored if v.notes}
    renames = {}
    for name, folder in configured.items():
        if name in have:
            continue
        former = [
            v.name
            for v in stored
            if v.name not in configured and v.folder == folder and v.name not in held
        ]
        if len(former) == 1:
            renames[former[0]] = name
    return renames


def own_vaults(
    configured: Mapping[str, str],
    config: str | None,
    holders: Mapping[str, tuple[str | None, str | None]],
) -> tuple[str, ...]:
    """The vaults of a configuration whose rows are its own, given its vaults' folders and
    its file, and each stored vault's folder and the file that synced it: what it reads,
    and what its workers build.

    A vault of its name that another configuration synced from another folder is another
    vault (`vault_refusal` refuses the sync): its rows are not this configuration's to read,
    nor its notes to build with this configuration's settings. One its own config synced
    elsewhere is the same vault moved."""
    return tuple(
        name
        for name, folder in configured.items()
        if not (
            name in holders
            and holders[name][0] not in (None, folder)
            and holders[name][1] != config
        )
    )


def searched_vaults(
    configured: Mapping[str, str],
    config: str | None,
    holders: Mapping[str, tuple[str | None, str | None]],
) -> VaultFilter:
    """The vault filter of a configuration's reads (`vault_filter`) over its `own_vaults`;
    no vault when the index holds none of its vaults to read."""
    own = own_vaults(configured, config, holders)
    if not own:
        return ()  # every vault would be another's rows
    return vault_filter(own, holders.keys())


def vault_filter(configured: Sequence[str], stored: Collection[str]) -> VaultFilter:
    """The vaults a configuration's reads must be kept to: every vault (None) while the
    index holds only its vaults (a filter costs every search a join), its own once the index
    holds others (another configuration's, or one no config names any more)."""
    return None if set(stored) <= set(configured) else tuple(configured)
