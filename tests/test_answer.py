"""`kb ask`: fitting passages into the window, citation filtering (whole and streamed),
recognising "your notes don't say", and the flow against a real index with the fake model."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kb.config import SearchMode
from kb.errors import LLMError
from kb.fusion import Fusion
from kb.llm.fake import FakeChat
from kb.models.base import ChatModel, Prompt, TokenUsage
from kb.search.answer import (
    CUT_MARK,
    MIN_PASSAGE_CHARS,
    NOTHING_FOUND,
    Answer,
    CitationFilter,
    ask,
    filter_citations,
    fit_passages,
    note_date,
    says_not_in_notes,
)
from kb.search.plan import SearchPlan
from kb.services.searching import SearchRequest
from kb.store import NoteInfo, SearchFilter, Store
from support.configs import OWNER, make_config
from support.fake_kb import Kb
from support.reading import search_store

# -- fitting passages --------------------------------------------------------------------------


def test_passages_that_fit_are_all_whole() -> None:
    assert fit_passages(["a" * 300, "b" * 300], 1000) == [("a" * 300, False), ("b" * 300, False)]


def test_best_passages_stay_whole_and_the_rest_are_cut_visibly() -> None:
    texts = ["a" * 500, "b" * 900, "c" * 900]
    fitted = fit_passages(texts, 1200)
    assert fitted[0] == ("a" * 500, False)
    assert [cut for _, cut in fitted[1:]] == [True, True]
    assert all(text.endswith(CUT_MARK) for text, _ in fitted[1:])
    assert sum(len(t) for t, _ in fitted) <= 1200
    # The rest share what is left equally.
    assert abs(len(fitted[1][0]) - len(fitted[2][0])) <= 1


def test_passages_without_room_for_a_useful_share_are_left_out() -> None:
    fitted = fit_passages(["a" * 900, "b" * 900, "c" * 900], 900 + MIN_PASSAGE_CHARS + 10)
    assert [t[0] for t, _ in fitted] == ["a", "b"]
    assert fitted[1][1] is True


def test_the_best_passage_alone_too_long_is_cut_to_the_budget() -> None:
    [(text, cut)] = fit_passages(["a" * 5000], 1000)
    assert cut and text.endswith(CUT_MARK) and 900 < len(text) <= 1000


# -- citations ---------------------------------------------------------------------------------

ANSWER = "The NAS runs ZFS [1], backed up nightly [2, 9] by restic [7]. See [the docs] [3]."


def test_citations_naming_no_passage_are_removed() -> None:
    text, cited = filter_citations(ANSWER, {1, 2, 3})
    assert text == "The NAS runs ZFS [1], backed up nightly [2] by restic. See [the docs] [3]."
    assert cited == [1, 2, 3]


def test_an_answer_whose_citations_all_name_nothing_keeps_its_text() -> None:
    assert filter_citations("It is blue [4].", {1, 2}) == ("It is blue.", [])


@pytest.mark.parametrize("size", [1, 2, 3, 7])
def test_streamed_citations_are_filtered_as_the_whole_text_is(size: int) -> None:
    f = CitationFilter({1, 2, 3})
    pieces = [ANSWER[i : i + size] for i in range(0, len(ANSWER), size)]
    shown = [f.feed(p) for p in pieces] + [f.close()]
    assert "".join(shown).strip() == filter_citations(ANSWER, {1, 2, 3})[0]
    # A bad citation is never shown, not even in part.
    assert not any("9" in s or "7" in s for s in shown)


def test_an_unclosed_bracket_at_the_end_is_text() -> None:
    assert filter_citations("Costs [1] about [12", {1}) == ("Costs [1] about [12", [1])


def test_repeated_citations_are_listed_once_in_order_of_use() -> None:
    assert filter_citations("A [2]. B [1][2]. C [2,1].", {1, 2})[1] == [2, 1]


@pytest.mark.parametrize(
    "answer",
    [
        "Your notes don't say which flour Maria recommended.",
        "Your notes don\u2019t say.",
        "The notes do not mention Joanna's hair colour.",
        "That is not in your notes.",
        "The passages don't say.",
    ],
)
def test_saying_the_notes_do_not_hold_the_answer_is_recognised(answer: str) -> None:
    assert says_not_in_notes(answer)


@pytest.mark.parametrize(
    "answer",
    ["You climbed Mount Takao on 12 April [1].", "Your notes say it runs ZFS [2]."],
)
def test_an_answer_is_not_mistaken_for_a_refusal(answer: str) -> None:
    assert not says_not_in_notes(answer)


def test_a_note_is_dated_by_its_frontmatter_else_its_modification_day() -> None:
    info = NoteInfo("v", "a.md", False, "2024-04-12", 0, [], 1)
    assert note_date(info) == "2024-04-12"
    assert note_date(NoteInfo("v", "a.md", False, None, 1_715_000_000 * 10**9, [], 1)) == (
        "2024-05-06"
    )
    assert note_date(None) is None


# -- the flow, on a real index -----------------------------------------------------------------


class ScriptedChat:
    """A chat model that streams a fixed answer and keeps the prompt it was sent."""

    def __init__(self, answer: str) -> None:
        self.name = "scripted"
        self.usage = TokenUsage()
        self.answer = answer
        self.prompts: list[Prompt] = []

    def complete(self, prompt: Prompt) -> str:
        return "".join(self.stream(prompt))

    def stream(self, prompt: Prompt) -> Iterator[str]:
        self.prompts.append(prompt)
        for i in range(0, len(self.answer), 3):
            yield self.answer[i : i + 3]


def _ask(
    kb: Kb,
    chat: ChatModel,
    question: str,
    *,
    context_window: int = 8192,
    on_text: Callable[[str], None] | None = None,
    **plan: Any,
) -> Answer:
    return ask(
        kb.embedder,
        chat,
        SearchPlan(question, **plan),
        candidates=kb.store.candidates,
        vectors=kb.store.vectors,
        queue=kb.store.queue,
        documents=kb.store.documents,
        context_window=context_window,
        on_text=on_text,
    )


def test_ask_answers_from_numbered_passages_and_cites_them(kb: Kb) -> None:
    kb.sync()
    kb.reset_counts()
    streamed: list[str] = []
    answer = _ask(
        kb, kb.chat, "Which miso goes into the weeknight ramen?", top_k=4, on_text=streamed.append
    )
    assert kb.chat.calls == {"answer": 1}
    assert [s.number for s in answer.sources] == [1, 2, 3, 4]
    assert answer.cited and set(answer.cited) <= {1, 2, 3, 4}
    cited = answer.sources[answer.cited[0] - 1]
    assert cited.hit.path == "Reference/Recipes/Weeknight Miso Ramen.md"
    assert "".join(streamed).strip() == answer.text
    assert not answer.not_in_notes
    assert answer.model == "fake-chat"
    prompt = kb.chat.prompts[-1]
    # Each passage is numbered with its note's title; the ramen note gives itself no date,
    # so none is said (its file's time would be a guess).
    assert '[1] in "Reference/Recipes/Weeknight Miso Ramen" > Weeknight Miso Ramen:' in (
        prompt.user
    )
    assert "Question: Which miso" in prompt.user
    assert all(s.date for s in answer.sources)


def test_a_first_person_question_is_the_owners(kb: Kb) -> None:
    kb.sync()
    chat = ScriptedChat("You climbed Mount Takao [1].")
    answer = _ask(kb, chat, "when did I climb a mountain", owner=OWNER, top_k=3)
    [prompt] = chat.prompts
    assert f"The user is {OWNER}" in prompt.user and OWNER not in prompt.system
    mine = [s for s in answer.sources if s.hit.path.startswith("Alex/")]
    assert mine and all(s.personal for s in mine)
    for source in answer.sources:
        header = next(
            line for line in prompt.user.splitlines() if line.startswith(f"[{source.number}] ")
        )
        # The owner's notes are theirs ("You"), dated by the note; the rest the writer's the
        # model named, or someone else's.
        mine_by_name = f"[{source.number}] You ({OWNER}), 12 April 2024, in "
        assert header.startswith(mine_by_name) is source.personal
    # Whose "I" it is, is said by name: the owner's in their notes, the clipping's writer's.
    journal = next(s for s in mine if "Journal" in s.hit.path)
    assert " I " not in f" {journal.text} " and OWNER in journal.text
    clipping = next(s for s in answer.sources if s.hit.path.startswith("Clippings/"))
    assert clipping.header().startswith("Hannah Whitfield, 28 April 2024, in ")
    assert "Hannah Whitfield" in clipping.text and " I " not in f" {clipping.text} "


def test_a_citation_naming_no_passage_is_never_shown(kb: Kb) -> None:
    kb.sync()
    chat = ScriptedChat("It runs ZFS [1] and Proxmox [8].")
    streamed: list[str] = []
    answer = _ask(kb, chat, "what does the home server run", top_k=3, on_text=streamed.append)
    assert answer.text == "It runs ZFS [1] and Proxmox."
    assert answer.cited == [1]
    assert "8" not in "".join(streamed)


def test_an_empty_answer_is_an_error_not_a_blank(kb: Kb) -> None:
    kb.sync()
    with pytest.raises(LLMError, match="returned an empty answer"):
        _ask(kb, ScriptedChat("  \n"), "what does the home server run", top_k=2)


def test_the_model_saying_the_notes_do_not_know_is_reported(kb: Kb) -> None:
    kb.sync()
    answer = _ask(kb, kb.chat, "xylophone zeppelin quasar", top_k=2)
    assert answer.not_in_notes
    assert answer.text.startswith("Your notes don't say")
    assert answer.cited == []


def test_no_passage_found_means_no_model_call(kb: Kb) -> None:
    kb.sync()
    kb.reset_counts()
    answer = _ask(
        kb,
        kb.chat,
        "when did I climb a mountain",
        owner=OWNER,
        filters=SearchFilter(path_prefix="Nowhere/"),
    )
    assert kb.chat.total_calls == 0
    assert answer.text == NOTHING_FOUND and answer.not_in_notes
    assert answer.sources == [] and answer.model is None


def test_passages_are_cut_to_fit_a_small_context_window(kb: Kb) -> None:
    kb.sync()
    chat = ScriptedChat("Noted [1].")
    answer = _ask(kb, chat, "postgres backups restore vacuum", top_k=8, context_window=2048)
    [prompt] = chat.prompts
    best = answer.sources[0]
    assert not best.cut and best.text == best.hit.content.strip()
    # The rest did not all fit: some were cut (visibly) or left out.
    assert len(answer.sources) < 8 or any(s.cut for s in answer.sources)
    assert all(s.text.endswith(CUT_MARK) for s in answer.sources if s.cut)
    assert prompt.num_ctx <= 2048


def test_passages_are_retrieved_with_the_configured_fusion(kb: Kb) -> None:
    kb.sync()
    question = "when did Alex climb Mount Takao"

    def order(fusion: Fusion) -> list[tuple[str, int]]:
        answer = _ask(kb, kb.chat, question, top_k=6, fusion=fusion)
        return [(s.hit.path, s.hit.start_line) for s in answer.sources]

    def listed(mode: SearchMode) -> list[tuple[str, int]]:
        hits = search_store(kb.store, kb.embedder, SearchPlan(question, top_k=6, mode=mode)).hits
        return [(h.path, h.start_line) for h in hits]

    # All the weight on one list: the passages come in that list's order.
    assert order(Fusion("tm2c2", 1.0)) == listed("vector")
    assert order(Fusion("tm2c2", 0.0)) == listed("text")


def test_answers_come_from_the_ask_model_and_everything_else_from_llms(
    store: Store, vault: Path
) -> None:
    kb = Kb(store, make_config(vault, ask={"chat_model": "bigger-fake", "context_window": 2048}))
    kb.sync()
    kb.reset_counts()
    answer = kb.search_service().ask(SearchRequest("Which miso goes into the weeknight ramen?"))
    assert answer.model == "bigger-fake"
    answering = kb.answer_chat
    assert isinstance(answering, FakeChat) and answering is not kb.chat
    assert answering.calls == {"answer": 1} and kb.chat.total_calls == 0
    # The prompt fits the answering model's window, not [llm]'s.
    assert answering.prompts[-1].num_ctx <= 2048


@pytest.mark.parametrize(("passages", "top_k", "given"), [(None, None, 3), (2, None, 2), (2, 4, 4)])
def test_an_answer_reads_ask_passages_unless_the_question_says(
    store: Store, vault: Path, passages: int | None, top_k: int | None, given: int
) -> None:
    """A search lists query.top_k chunks (5); an answer is written from the fewer best that
    `[ask] passages` says, or as many as the question's --top-k."""
    kb = Kb(store, make_config(vault, ask={} if passages is None else {"passages": passages}))
    kb.sync()
    question = "what does the home server run"
    answer = kb.search_service().ask(SearchRequest(question, top_k=top_k))
    assert len(answer.sources) == given
    assert len(kb.search_service().search(SearchRequest(question)).hits) == 5


def test_without_ask_settings_the_llm_chat_model_answers(kb: Kb) -> None:
    assert kb.answer_chat is kb.chat
    kb.sync()
    assert kb.search_service().ask(SearchRequest("what does the home server run")).model == (
        "fake-chat"
    )


def test_an_answer_its_passages_do_not_hold_is_withdrawn_for_the_closest_passages(
    kb: Kb,
) -> None:
    kb.sync()
    made_up = "You climbed Kilimanjaro with seventeen porters and a zebra [1]."
    streamed: list[str] = []
    answer = _ask(
        kb,
        ScriptedChat(made_up),
        "when did I climb a mountain",
        owner=OWNER,
        top_k=3,
        on_text=streamed.append,
    )
    assert answer.withdrawn == made_up
    assert answer.withdrawn_because == "words the passages do not hold"
    assert answer.text == "Not in your notes. The closest passages are [1], [2] and [3]."
    assert answer.not_in_notes and answer.cited == []
    # What streamed is followed by kb's own reply.
    assert "".join(streamed).endswith("\n\n" + answer.text)
    # An answer its passages hold stands, and so does the model's own "don't say".
    takao = next(s.number for s in answer.sources if "Takao" in s.text)
    said = f"You climbed Mount Takao [{takao}]."
    held = _ask(kb, ScriptedChat(said), "when did I climb a mountain", owner=OWNER, top_k=3)
    assert held.withdrawn is None and held.text == said
    declined = _ask(kb, ScriptedChat("Your notes don't say."), "what is a zeppelin")
    assert declined.withdrawn is None and declined.text == "Your notes don't say."


def test_a_sentence_cited_to_the_wrong_passage_stands_with_the_one_that_holds_it(
    kb: Kb,
) -> None:
    kb.sync()
    question = "when did I climb a mountain"
    sources = _ask(kb, ScriptedChat("x"), question, owner=OWNER, top_k=3).sources
    summit = next(s.number for s in sources if "crowded" in s.text)
    other = next(s.number for s in sources if "stepping stones" in s.text)
    slipped = f"The summit was crowded, and Mount Fuji came out of the haze [{other}]."
    answer = _ask(kb, ScriptedChat(slipped), question, owner=OWNER, top_k=3)
    assert answer.withdrawn is None and answer.text == slipped
    # The passage that holds it is the answer's source, whatever number the model wrote.
    assert answer.cited == [summit]


def test_the_folders_of_the_vaults_answers_come_from_are_known(kb: Kb) -> None:
    kb.sync()
    folders = kb.store.documents.folder_names(["v"])
    assert {"Alex", "Journal", "People"} <= folders
    assert not any("/" in f or f.endswith(".md") for f in folders)
    assert kb.store.documents.folder_names(["no such vault"]) == set()
