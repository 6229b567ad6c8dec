"""Links as data: extraction and Obsidian's resolution rules (pure), then the store and a
sync keeping them current (a real PostgreSQL)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import anyio
import pytest
from mcp import Client
from starlette.testclient import TestClient

from kb.errors import KbError
from kb.mcp.tools import build_server
from kb.services.note_links import NoteFinder
from kb.store import Store
from kb.vault.link_rules import Link, NoteName, extract, link_key, note_keys, resolve
from kb.web.routes import web_app
from support.configs import make_config
from support.daemons import daemon_kb, no_calls, running, settle, wait_for
from support.fake_kb import Kb
from support.reading import rows, tool_text

# -- extraction -----------------------------------------------------------------------------


def test_every_kind_of_link_with_its_anchor_display_and_line() -> None:
    body = "\n".join(
        [
            "See [[Note]] and [[Other|shown]].",
            "A heading: [[Note#Part two]], a block: [[Note#^abc-1]].",
            "![[Embedded]] and [[folder/Deep Note]].",
            "[md](Plain.md) and [spaced](folder/Note%20name.md#Some%20heading)",
            "[angle](<Far away/Note name.md>) ![md embed](Pic%20note.md)",
        ]
    )
    found = [(x.kind, x.target, x.anchor, x.display, x.line) for x in extract(body, first_line=5)]
    assert found == [
        ("wikilink", "Note", "", "", 5),
        ("wikilink", "Other", "", "shown", 5),
        ("wikilink", "Note", "Part two", "", 6),
        ("wikilink", "Note", "^abc-1", "", 6),
        ("embed", "Embedded", "", "", 7),
        ("wikilink", "folder/Deep Note", "", "", 7),
        ("markdown", "Plain.md", "", "md", 8),
        ("markdown", "folder/Note name.md", "Some heading", "spaced", 8),
        ("markdown", "Far away/Note name.md", "", "angle", 9),
        ("embed", "Pic note.md", "", "md embed", 9),
    ]


def test_code_comments_attachments_web_and_same_note_links_are_not_links() -> None:
    body = "\n".join(
        [
            "```",
            "[[In a fence]]",
            "```",
            "Inline `[[code]]` and ``[x](Code.md)``, %%[[hidden]]%%.",
            "![[photo.png]] [[report.pdf]] [site](https://example.org/Note.md)",
            "[mail](mailto:a@b.c) [[#Same note]] [[Real]]",
            "| a | [[Cell\\|shown]] |",
        ]
    )
    assert [(x.target, x.display, x.line) for x in extract(body)] == [
        ("Real", "", 6),
        ("Cell", "shown", 7),
    ]


def test_each_link_knows_its_chunk_by_line_span() -> None:
    found = extract("[[A]]\n\n[[B]]\n\n[[C]]", first_line=3, spans=[(3, 4), (5, 6)])
    assert [(x.target, x.chunk) for x in found] == [("A", 0), ("B", 1), ("C", None)]


def test_keys_fold_case_unicode_form_and_the_note_suffix() -> None:
    assert link_key("Folder/Café.md") == link_key("CAFE\u0301") == "café"
    assert note_keys(NoteName("a/Note.md", ("Other Name", " "))) == {"note", "other name"}


# -- resolution, as Obsidian resolves --------------------------------------------------------

NOTES = [
    NoteName("Note.md"),
    NoteName("folder/Note.md"),
    NoteName("folder/sub/Deep.md"),
    NoteName("elsewhere/deep/Deep.md"),
    NoteName("a/b/Unique Name.md"),
    NoteName("people/Ada Lovelace.md", ("Ada", "Countess")),
    NoteName("x/Twin.md"),
    NoteName("y/Twin.md"),
    NoteName("Dots v1.2.md"),
]


@pytest.mark.parametrize(
    ("target", "source", "expected"),
    [
        # the exact path from the root, with or without the suffix, any case
        ("folder/Note", "z/Source.md", "folder/Note.md"),
        ("FOLDER/note.md", "z/Source.md", "folder/Note.md"),
        ("Note", "z/Source.md", "Note.md"),
        # a path from the root first, even where the linking note's folder has the name
        ("Note", "folder/Source.md", "Note.md"),
        # else the note of that name: the one in the linking note's folder on a tie, else
        # the shortest path, else the first in path order
        ("Deep", "z/Source.md", "folder/sub/Deep.md"),
        ("Twin", "z/Source.md", "x/Twin.md"),
        ("Twin", "y/Source.md", "y/Twin.md"),
        # a path's end names the note
        ("deep/Deep", "z/Source.md", "elsewhere/deep/Deep.md"),
        ("b/Unique Name", "z/Source.md", "a/b/Unique Name.md"),
        ("Unique Name", "z/Source.md", "a/b/Unique Name.md"),
        # from the root, and relative to the linking note only when written so
        ("/Note", "folder/Source.md", "Note.md"),
        ("/Deep", "z/Source.md", None),
        ("./Note", "folder/Source.md", "folder/Note.md"),
        ("../Note", "folder/Source.md", "Note.md"),
        ("sub/Deep", "folder/Source.md", "folder/sub/Deep.md"),
        ("../../Note", "folder/Source.md", None),
        # aliases, case-insensitive, for a target naming no folder; a name beats an alias
        ("ada", "z/Source.md", "people/Ada Lovelace.md"),
        ("countess", "z/Source.md", "people/Ada Lovelace.md"),
        ("people/Ada", "z/Source.md", None),
        # a dot in a name is no suffix
        ("Dots v1.2", "z/Source.md", "Dots v1.2.md"),
        ("Nowhere", "z/Source.md", None),
    ],
)
def test_resolution_rules(target: str, source: str, expected: str | None) -> None:
    assert resolve(target, source, NOTES) == expected


def test_a_name_beats_an_alias() -> None:
    notes = [NoteName("Ada.md"), NoteName("people/Ada Lovelace.md", ("Ada",))]
    assert resolve("Ada", "z/S.md", notes) == "Ada.md"


# -- the store and a sync --------------------------------------------------------------------


def _write(vault: Path, files: dict[str, str]) -> None:
    for path, text in files.items():
        (vault / path).parent.mkdir(parents=True, exist_ok=True)
        (vault / path).write_text(text)


def _links(store: Store) -> list[tuple[str, str, str | None]]:
    return [
        (r["source"], r["target"], r["resolved"])
        for r in rows(
            store,
            "SELECT s.path AS source, l.target, t.path AS resolved FROM links l"
            " JOIN documents s ON s.id = l.document_id"
            " LEFT JOIN documents t ON t.id = l.target_id ORDER BY s.path, l.position",
        )
    ]


def _id(store: Store, path: str) -> int:
    [row] = rows(store, "SELECT id FROM documents WHERE path = %s", path)
    return int(row["id"])


@pytest.fixture
def hub_and_spokes(store: Store, tmp_path: Path) -> tuple[Kb, Path]:
    vault = tmp_path / "linked"
    _write(
        vault,
        {
            "Hub.md": "# Hub\n\nTo [[Spoke]], [[Later]] and [[Nick]].\n\n```\n[[Code]]\n```\n",
            "Spoke.md": "---\naliases: [Nick]\n---\n# Spoke\n\nBack to [[hub|the hub]].\n",
            "Other.md": "# Other\n\nAlso [Spoke](Spoke.md#Spoke).\n",
        },
    )
    return Kb(store, make_config(vault)), vault


def test_a_sync_stores_and_resolves_links(hub_and_spokes: tuple[Kb, Path], store: Store) -> None:
    kb, _ = hub_and_spokes
    kb.sync()
    assert _links(store) == [
        ("Hub.md", "Spoke", "Spoke.md"),
        ("Hub.md", "Later", None),
        ("Hub.md", "Nick", "Spoke.md"),
        ("Other.md", "Spoke.md", "Spoke.md"),
        ("Spoke.md", "hub", "Hub.md"),
    ]
    spoke, hub = _id(store, "Spoke.md"), _id(store, "Hub.md")
    assert [(r.path, r.line, r.display) for r in store.links.backlinks(spoke)] == [
        ("Hub.md", 3, ""),
        ("Hub.md", 3, ""),
        ("Other.md", 3, "Spoke"),
    ]
    assert [(r.path, r.title) for r in store.links.out_links(spoke)] == [("Hub.md", "Hub")]
    assert [(r.target, r.path) for r in store.links.unresolved(hub)] == [("Later", None)]
    assert sorted(store.links.edges(None)) == sorted(
        [(hub, spoke), (_id(store, "Other.md"), spoke), (spoke, hub)]
    )
    assert store.links.edges(("elsewhere",)) == []
    counts = store.links.counts(("v",))
    assert (counts.links, counts.unresolved) == (5, 1)


def test_new_moved_deleted_and_realiased_notes_re_resolve_without_models(
    hub_and_spokes: tuple[Kb, Path], store: Store
) -> None:
    kb, vault = hub_and_spokes
    kb.sync()
    # A note appears that an old link named.
    _write(vault, {"Later.md": "# Later\n"})
    kb.sync()
    assert ("Hub.md", "Later", "Later.md") in _links(store)
    # A move: links by the old name lead nowhere, by the new name somewhere.
    chunks = rows(store, "SELECT id, embedding FROM chunks ORDER BY id")
    kb.reset_counts()
    (vault / "Spoke.md").rename(vault / "Wheel.md")
    kb.sync()
    assert (kb.embedder.calls, kb.chat.calls.total()) == (0, 0)
    assert ("Hub.md", "Spoke", None) in _links(store)
    assert ("Hub.md", "Nick", "Wheel.md") in _links(store)  # its alias went with it
    assert rows(store, "SELECT id, embedding FROM chunks ORDER BY id") == chunks
    # The alias dropped: the link by it leads nowhere.
    _write(vault, {"Wheel.md": "# Wheel\n\nBack to [[hub|the hub]].\n"})
    kb.sync()
    assert ("Hub.md", "Nick", None) in _links(store)
    # A delete: the links to it lead nowhere; another note of the name takes them.
    _write(vault, {"sub/Hub.md": "# Another hub\n"})
    kb.sync()
    assert ("Wheel.md", "hub", "Hub.md") in _links(store)
    (vault / "Hub.md").unlink()
    kb.sync()
    assert ("Wheel.md", "hub", "sub/Hub.md") in _links(store)


def test_an_unchanged_sync_writes_no_link(hub_and_spokes: tuple[Kb, Path], store: Store) -> None:
    kb, _ = hub_and_spokes
    kb.sync()
    versions = rows(store, "SELECT xmin::text AS version FROM links ORDER BY 1")
    kb.sync()
    assert rows(store, "SELECT xmin::text AS version FROM links ORDER BY 1") == versions
    assert store.links.resolve("v") == 0


def test_links_a_stopped_sync_left_unresolved_are_resolved_by_the_next(
    hub_and_spokes: tuple[Kb, Path], store: Store
) -> None:
    kb, _ = hub_and_spokes
    kb.sync()
    with store.pool.connection() as conn:
        conn.execute("UPDATE links SET target_id = NULL, due = true")
    kb.sync()
    assert ("Hub.md", "Spoke", "Spoke.md") in _links(store)
    assert rows(store, "SELECT count(*) AS n FROM links WHERE due") == [{"n": 0}]


def test_notes_indexed_before_links_get_them_at_the_next_sync(
    hub_and_spokes: tuple[Kb, Path], store: Store
) -> None:
    kb, _ = hub_and_spokes
    kb.sync()
    with store.pool.connection() as conn:
        conn.execute("DELETE FROM links")
        conn.execute("DELETE FROM note_names")
        conn.execute("UPDATE documents SET links_version = 0")
    chunks = rows(store, "SELECT id FROM chunks ORDER BY id")
    kb.reset_counts()
    kb.sync()
    assert (kb.embedder.calls, kb.chat.calls.total()) == (0, 0)
    assert len(_links(store)) == 5
    assert ("Hub.md", "Nick", "Spoke.md") in _links(store)
    assert rows(store, "SELECT id FROM chunks ORDER BY id") == chunks
    assert rows(store, "SELECT count(*) AS n FROM documents WHERE links_version = 0") == [{"n": 0}]


def test_a_link_to_an_ignored_note_leads_nowhere(store: Store, tmp_path: Path) -> None:
    vault = tmp_path / "private"
    _write(vault, {"Open.md": "[[Secret]]\n", "private/Secret.md": "# Secret\n"})
    ignoring = {"name": "v", "path": str(vault), "ignore": ["private/**"]}
    kb = Kb(store, make_config(vault, vaults=[ignoring]))
    kb.sync()
    assert _links(store) == [("Open.md", "Secret", None)]


def test_a_link_looks_up_its_targets_name() -> None:
    assert Link("wikilink", "Folder/A.md", "", "", 1, None).key == "a"


# -- a NOTE argument, for every face ---------------------------------------------------------


def test_a_note_argument_in_each_form(
    hub_and_spokes: tuple[Kb, Path], store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    kb, vault = hub_and_spokes
    kb.sync()
    finder = NoteFinder(kb.config.vaults, store.links)
    for form in ("v:Spoke.md", "Spoke.md", str(vault / "Spoke.md"), "spoke", "Nick"):
        assert (finder.find(form).vault, finder.find(form).path) == ("v", "Spoke.md"), form
    monkeypatch.chdir(vault)
    assert finder.find("./Other.md").path == "Other.md"
    for bad in ("Nowhere", "w:Spoke.md", "", "a\x00b"):
        with pytest.raises(KbError):
            finder.find(bad)
    found = finder.links_of("Spoke")
    assert [r.path for r in found.linked_from] == ["Hub.md", "Hub.md", "Other.md"]
    assert found.as_json()["links_to"][0] == {
        "vault": "v",
        "path": "Hub.md",
        "title": "Hub",
        "line": 6,
        "kind": "wikilink",
        "target": "hub",
        "anchor": "",
        "display": "the hub",
    }
    assert finder.links_of("Hub").as_json()["unresolved"] == [
        {
            "vault": "v",
            "line": 3,
            "kind": "wikilink",
            "target": "Later",
            "anchor": "",
            "display": "",
        }
    ]


# -- the faces -------------------------------------------------------------------------------


def test_the_faces_show_a_notes_links(kb: Kb, store: Store) -> None:
    kb.sync()
    web = TestClient(web_app(kb, host="127.0.0.1", token=None), base_url="http://127.0.0.1:8766")
    answer = web.get("/api/links", params={"path": "Alex/Work Log.md"})
    assert answer.status_code == 200
    links = answer.json()
    assert {r["path"] for r in links["linked_from"]} >= {
        "Projects/Billing Anomaly Detection.md",
        "Alex/Goals 2024.md",
    }
    assert web.get("/api/links", params={"vault": "v", "path": "Alex/Work Log.md"}).json() == links
    for params, status in (
        ({"path": "Nowhere.md"}, 404),
        ({}, 400),
        ({"path": "/etc/passwd"}, 404),
    ):
        failed = web.get("/api/links", params=params)
        assert failed.status_code == status and "error" in failed.json()
    page = web.get("/note", params={"vault": "v", "path": "Alex/Work Log.md"})
    assert "Linked from" in page.text and "Billing Anomaly Detection" in page.text
    status = web.get("/api/status").json()["links"]
    counts = store.links.counts(None)
    assert status == {"links": counts.links, "unresolved": counts.unresolved} and counts.links > 10

    async def check(client: Client) -> None:
        result = await client.call_tool("note_links", {"note": "Work Log"})
        assert json.loads(tool_text(result)) == links
        missing = await client.call_tool("note_links", {"note": "No such note"})
        assert missing.is_error and "no indexed note" in tool_text(missing)
        summary = json.loads(tool_text(await client.call_tool("status", {})))
        assert summary["links"] == counts.links

    server = build_server(kb)

    async def main() -> None:
        async with Client(server) as client:
            await check(client)

    anyio.run(main)


# -- the daemon keeps them current -----------------------------------------------------------


def _leads_to(store: Store, target: str) -> list[str | None]:
    return [resolved for _, written, resolved in _links(store) if written == target]


def test_the_daemon_keeps_links_current(store: Store, vault: Path) -> None:
    kb = daemon_kb(store, vault)
    with running(kb) as daemon:
        # An edit: the new link is stored, leading nowhere yet.
        with (vault / "Inbox/Untitled.md").open("a") as note:
            note.write("\nSee [[Brand New]].\n")
        settle(daemon, kb)
        assert _leads_to(store, "Brand New") == [None]
        # A note appears that the link names.
        (vault / "Inbox/Brand New.md").write_text("# Brand new\n")
        wait_for(lambda: _leads_to(store, "Brand New") == ["Inbox/Brand New.md"], "resolved")
        settle(daemon, kb)
        # A rename re-resolves with no model call and no chunk written again.
        kb.reset_counts()
        chunks = rows(store, "SELECT id FROM chunks ORDER BY id")
        os.rename(vault / "Inbox/Brand New.md", vault / "Inbox/Old News.md")
        wait_for(lambda: _leads_to(store, "Brand New") == [None], "unresolved after a rename")
        settle(daemon, kb)
        assert no_calls(kb)
        assert rows(store, "SELECT id FROM chunks ORDER BY id") == chunks
        # Named again, then deleted.
        with (vault / "Inbox/Untitled.md").open("a") as note:
            note.write("And [[old news]].\n")
        wait_for(lambda: _leads_to(store, "old news") == ["Inbox/Old News.md"], "resolved")
        (vault / "Inbox/Old News.md").unlink()
        wait_for(lambda: _leads_to(store, "old news") == [None], "unresolved after a delete")
        settle(daemon, kb)
