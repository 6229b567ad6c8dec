"""Links, comments and block ids read as a person reads them, for what is searched."""

from __future__ import annotations

import pytest

from kb.context.layout import full_context
from kb.prompting.outputs import structural_file_summary
from kb.vault.wikitext import readable


@pytest.mark.parametrize(
    ("written", "read"),
    [
        ("Met [[People/Ana Lima|Ana]] today.", "Met Ana today."),
        ("See [[Projects/Garden plan]].", "See Garden plan."),
        ("See [[Garden plan.md]].", "See Garden plan."),
        ("See [[Garden plan#Beds]].", "See Garden plan Beds."),
        ("See [[Garden plan#^a1b2]].", "See Garden plan."),
        ("| [[Garden plan\\|the plan]] |", "| the plan |"),
        ("Photo: ![[beds.png|300]] done", "Photo:  done"),
        ("Embedded ![[Weekly review]] here", "Embedded Weekly review here"),
        ("A claim. ^claim-1\nNext", "A claim.\nNext"),
        ("Kept %%not this%% text", "Kept  text"),
        ("Before %%a\nlong\ncomment%% after", "Before  after"),
        ("2^10 is 1024", "2^10 is 1024"),
    ],
)
def test_what_a_reader_sees(written: str, read: str) -> None:
    assert readable(written) == read


def test_code_is_left_as_it_is() -> None:
    text = "Use [[A|a]]:\n```\nx = [[1, 2]] %% not a comment %%\n```\nthen [[B]]"
    assert readable(text) == "Use a:\n```\nx = [[1, 2]] %% not a comment %%\n```\nthen B"


def test_the_searched_text_reads_links_the_content_does_not_change() -> None:
    content = "Met [[People/Ana Lima|Ana]] ^id1"
    assert full_context("", "", "", content) == "Met Ana"
    assert content == "Met [[People/Ana Lima|Ana]] ^id1"


def test_aliases_are_searched_as_the_title_is() -> None:
    summary = structural_file_summary("Ana Lima", "People", [], None, ("Ana", "A. Lima"))
    assert summary == 'Note "Ana Lima" (also "Ana", "A. Lima") in People.'
