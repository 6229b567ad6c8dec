"""Decoding and frontmatter/body parsing of single notes (pure, no database)."""

from __future__ import annotations

import pytest

from kb.errors import NoteError
from kb.vault.parsing import decode, parse_note, strip_code

# --- decode ------------------------------------------------------------------------------------


def test_decode_strips_utf8_bom_and_keeps_body() -> None:
    text = decode(b"\xef\xbb\xbf---\ntags: [a]\n---\n# Caf\xc3\xa9\n")
    assert text == "---\ntags: [a]\n---\n# Café\n"
    # Without the BOM the frontmatter fence is recognised.
    note = parse_note(text)
    assert note.body == "# Café\n"
    assert note.metadata["tags"] == ["a"]


def test_decode_normalizes_crlf_and_lone_cr() -> None:
    assert decode(b"one\r\ntwo\r\nthree\rfour") == "one\ntwo\nthree\nfour"


def test_decode_crlf_frontmatter_parses() -> None:
    note = parse_note(decode(b"---\r\ntitle: x\r\n---\r\nbody\r\n"))
    assert note.metadata["title"] == "x"
    assert note.body == "body\n"
    assert note.body_start_line == 4


def test_decode_rejects_nul_bytes() -> None:
    with pytest.raises(NoteError, match="NUL"):
        decode(b"text\x00more")


def test_decode_rejects_invalid_utf8() -> None:
    with pytest.raises(NoteError, match="UTF-8"):
        decode(b"caf\xe9 latin-1")


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be", "utf-8-sig"])
def test_decode_reads_a_note_after_its_byte_order_mark(encoding: str) -> None:
    """Windows editors save UTF-16 with a byte-order mark: its zero bytes are not binary."""
    text = "---\r\ntags: [a]\r\n---\r\n# Café 𝄞\r\n"
    data = text.encode(encoding)
    if encoding in ("utf-16-le", "utf-16-be"):
        data = "\ufeff".encode(encoding) + data  # the BOM written in the file's byte order
    assert decode(data) == "---\ntags: [a]\n---\n# Café 𝄞\n"


def test_decode_refuses_broken_or_binary_utf16() -> None:
    with pytest.raises(NoteError, match=r"not valid UTF-16 \(byte 4\)"):
        decode(b"\xff\xfeo\x00\x00\xdc")  # a lone low surrogate
    with pytest.raises(NoteError, match="NUL"):
        decode("\ufeffa\x00b".encode("utf-16-le"))


def test_decode_plain_text_unchanged() -> None:
    assert decode("héllo\n".encode()) == "héllo\n"


# --- frontmatter -------------------------------------------------------------------------------


def test_note_without_frontmatter_is_all_body() -> None:
    note = parse_note("# Title\n\ntext")
    assert note.body == "# Title\n\ntext"
    assert note.body_start_line == 1
    assert note.warnings == ()
    assert note.metadata == {"tags": [], "aliases": [], "links": []}


def test_frontmatter_tags_as_yaml_list() -> None:
    note = parse_note("---\ntags: [journal, hiking]\n---\nbody")
    assert note.metadata["tags"] == ["journal", "hiking"]
    assert note.body == "body"
    assert note.warnings == ()


def test_frontmatter_tags_as_block_list_with_hashes() -> None:
    note = parse_note("---\ntags:\n  - '#one'\n  - two\n---\n")
    assert note.metadata["tags"] == ["one", "two"]


def test_frontmatter_tags_as_comma_and_space_string() -> None:
    note = parse_note("---\ntags: work, billing postgres\n---\nbody")
    assert note.metadata["tags"] == ["work", "billing", "postgres"]


def test_frontmatter_singular_tag_key() -> None:
    note = parse_note("---\ntag: solo\n---\nbody")
    assert note.metadata["tags"] == ["solo"]
    assert "tag" not in note.metadata


def test_frontmatter_aliases_list_and_string() -> None:
    assert parse_note("---\naliases: [Takao hike, Hike]\n---\n").metadata["aliases"] == [
        "Takao hike",
        "Hike",
    ]
    assert parse_note("---\nalias: Kenji\n---\n").metadata["aliases"] == ["Kenji"]
    assert "alias" not in parse_note("---\nalias: Kenji\n---\n").metadata


def test_frontmatter_alias_string_keeps_spaces() -> None:
    # Unlike tags, an alias may contain spaces: only commas separate aliases.
    note = parse_note("---\naliases: Kenji Sato, K. Sato\n---\n")
    assert note.metadata["aliases"] == ["Kenji Sato", "K. Sato"]


def test_frontmatter_dates_become_iso_strings() -> None:
    note = parse_note(
        "---\ndate: 2024-04-12\nupdated: 2024-05-03 10:30:00\n"
        "nested: {when: 2024-01-02}\nlist: [2024-02-03]\n---\nbody"
    )
    meta = note.metadata
    assert meta["date"] == "2024-04-12"
    assert meta["updated"] == "2024-05-03T10:30:00"
    assert meta["nested"] == {"when": "2024-01-02"}
    assert meta["list"] == ["2024-02-03"]


def test_frontmatter_other_keys_kept() -> None:
    note = parse_note("---\nlocation: Mount Takao\nrating: 4\ndone: true\n---\nx")
    assert note.metadata["location"] == "Mount Takao"
    assert note.metadata["rating"] == 4
    assert note.metadata["done"] is True


def test_body_start_line_is_file_line_after_frontmatter() -> None:
    text = "---\ndate: 2024-04-12\ntags: [a]\n---\n# Title\ntext"
    note = parse_note(text)
    assert note.body_start_line == 5
    assert text.split("\n")[note.body_start_line - 1] == "# Title"
    assert note.body.split("\n")[0] == "# Title"


def test_frontmatter_closed_with_dots() -> None:
    note = parse_note("---\ntitle: x\n...\nbody")
    assert note.metadata["title"] == "x"
    assert note.body == "body"
    assert note.body_start_line == 4


def test_empty_frontmatter() -> None:
    note = parse_note("---\n---\nbody")
    assert note.body == "body"
    assert note.body_start_line == 3
    assert note.warnings == ()


def test_unclosed_frontmatter_keeps_whole_text_as_body() -> None:
    text = "---\ntitle: x\n\nSome text #kept"
    note = parse_note(text)
    assert note.body == text
    assert note.body_start_line == 1
    assert len(note.warnings) == 1
    assert "not closed" in note.warnings[0]
    assert note.metadata["tags"] == ["kept"]


def test_invalid_yaml_keeps_body_with_warning_naming_line() -> None:
    text = "---\ntitle: ok\nbad: @oops\n---\n# Body\nstill here #tag"
    note = parse_note(text)
    assert note.body == "# Body\nstill here #tag"
    assert "@oops" not in note.body
    assert note.body_start_line == 5
    assert len(note.warnings) == 1
    assert "YAML" in note.warnings[0]
    # `bad: @oops` is line 3 of the file.
    assert "line 3" in note.warnings[0]
    assert "title" not in note.metadata
    assert note.metadata["tags"] == ["tag"]


@pytest.mark.parametrize("frontmatter", ["- a\n- b", "just a string", "42"])
def test_non_mapping_frontmatter_warns(frontmatter: str) -> None:
    note = parse_note(f"---\n{frontmatter}\n---\nbody")
    assert note.body == "body"
    assert len(note.warnings) == 1
    assert "mapping" in note.warnings[0]
    assert note.metadata == {"tags": [], "aliases": [], "links": []}


def test_fence_not_on_first_line_is_not_frontmatter() -> None:
    text = "intro\n---\ntitle: x\n---\n"
    note = parse_note(text)
    assert note.body == text
    assert "title" not in note.metadata


# --- inline tags -------------------------------------------------------------------------------


def test_inline_tags_join_frontmatter_tags_without_duplicates() -> None:
    note = parse_note("---\ntags: [a, b]\n---\nText #c and #a again, then #c.")
    assert note.metadata["tags"] == ["a", "b", "c"]


def test_nested_tags_kept() -> None:
    note = parse_note("Working on #project/kb and #area/home-lab today")
    assert note.metadata["tags"] == ["project/kb", "area/home-lab"]


def test_tag_at_line_start_and_unicode() -> None:
    note = parse_note("#inbox\nsome #café note")
    assert note.metadata["tags"] == ["inbox", "café"]


def test_hash_in_fenced_code_is_not_a_tag() -> None:
    body = "Before #real\n\n```bash\n# comment #notatag\necho hi\n```\n\n~~~\n#also\n~~~\n"
    assert parse_note(body).metadata["tags"] == ["real"]


def test_hash_in_inline_code_is_not_a_tag() -> None:
    assert parse_note("Use `#define` or ``a #b`` here #yes").metadata["tags"] == ["yes"]


def test_heading_is_not_a_tag() -> None:
    note = parse_note("# Title\n## Sub heading\n###### Deep\ntext")
    assert note.metadata["tags"] == []


def test_url_fragment_is_not_a_tag() -> None:
    note = parse_note("See https://x.org/a#b and http://example.com/page#section-2")
    assert note.metadata["tags"] == []


def test_markdown_anchor_link_is_not_a_tag() -> None:
    assert parse_note("Jump to [x](#anchor) or [y](Other.md#part)").metadata["tags"] == []


def test_pure_number_is_not_a_tag() -> None:
    note = parse_note("Issue #123 and #2024 but #2024-review is a tag")
    assert note.metadata["tags"] == ["2024-review"]


def test_html_entity_and_word_hash_are_not_tags() -> None:
    assert parse_note("C# and x&#39;s and a#b").metadata["tags"] == []


# --- wikilinks ---------------------------------------------------------------------------------


def test_wikilinks_collected_without_alias_or_heading() -> None:
    note = parse_note(
        "[[Note]] and [[Kenji Sato|Kenji]] and [[Home Server#Backups]] and "
        "![[embed.png]] and [[Work Log#^block|see]] and [[Note]] again"
    )
    assert note.metadata["links"] == ["Note", "Kenji Sato", "Home Server", "embed.png", "Work Log"]


def test_wikilinks_in_code_are_ignored() -> None:
    note = parse_note("`[[Not a link]]`\n\n```\n[[Nor this]]\n```\n\n[[Real]]")
    assert note.metadata["links"] == ["Real"]


def test_wikilinks_in_frontmatter_body_only() -> None:
    note = parse_note("---\nrelated: '[[Elsewhere]]'\n---\nSee [[Here]]")
    assert note.metadata["links"] == ["Here"]
    assert note.metadata["related"] == "[[Elsewhere]]"


# --- strip_code --------------------------------------------------------------------------------


def test_strip_code_removes_fences_and_inline_spans() -> None:
    text = "keep `drop` keep\n```python\nDROPPED\n```\nafter"
    out = strip_code(text)
    assert "drop" not in out
    assert "DROPPED" not in out
    assert "python" not in out
    assert out.count("keep") == 2
    assert "after" in out


def test_strip_code_needs_matching_fence() -> None:
    # A ``` fence is not closed by ~~~; a longer closing fence is fine.
    out = strip_code("````\ninside\n``````\nout")
    assert "inside" not in out
    assert "out" in out
    out = strip_code("~~~\ncode\n```\nstill code\n~~~\nprose")
    assert "still code" not in out
    assert "prose" in out


def test_strip_code_leaves_plain_text() -> None:
    text = "no code here #tag [[link]]"
    assert strip_code(text) == text
