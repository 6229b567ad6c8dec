"""Whether an answer says only what its passages say (pure)."""

from __future__ import annotations

from kb.search.grounding import Grounding, Read, check, people_asked_about
from kb.search.reading import Writer

JOANNA = Writer("Joanna", owner=True)
NATE = Writer("Nate", owner=False)
SOMEONE = Writer(None, owner=False)

JOURNAL = Read(
    1,
    'You, 21 January 2022, in "Joanna/Journal/2022-01-21":',
    "You finished your first screenplay and printed it.\n\nYou watched a movie.",
    JOANNA,
)
LETTER = Read(
    2,
    'Someone else (not you), 15 April 2022, in "Letters/Nate/2022-04-15":',
    "Hey Joanna! Guess what.\n\nI dyed my hair purple last week (the week before 15 April 2022).",
    SOMEONE,
)


def test_an_answer_made_of_its_passages_words_stands() -> None:
    answer = "You finished your first screenplay and printed it [1]."
    question = "What did I finish in January 2022?"
    assert check(answer, question, [JOURNAL, LETTER], [1], owner="Joanna").why is None
    # The question's own words may be repeated.
    answer = "Nate dyed his hair purple the week before 15 April 2022 [2]."
    question = "When did Nate dye his hair?"
    assert check(answer, question, [JOURNAL, LETTER], [2], owner="Joanna").why is None


def test_words_numbers_and_months_from_nowhere_are_caught() -> None:
    question = "What did Joanna print?"
    made_up = "Joanna printed a novel about dragons and wizards in Prague [1]."
    assert check(made_up, question, [JOURNAL], [1], owner="Joanna").why == (
        "words the passages do not hold"
    )
    assert check(
        "You printed your screenplay 3 times [1].", question, [JOURNAL], [1], owner="Joanna"
    ).why == ("a number the passages do not give")
    assert check(
        "You printed your screenplay in March [1].", question, [JOURNAL], [1], owner="Joanna"
    ).why == ("a month the passages do not give")


def test_a_sentence_cited_to_the_wrong_passage_is_held_by_the_one_that_holds_it() -> None:
    # A small model copies a sentence well and cites the wrong number: the passage that
    # holds it stands behind it, and becomes the answer's source.
    answer = "Nate dyed his hair purple last week [1]."
    question = "What did Nate do?"
    found = check(answer, question, [JOURNAL, LETTER], [1], owner="Joanna")
    assert found == Grounding(None, (2,))
    # Held by the passage it cites, it keeps that one.
    answer = "You finished your first screenplay [1]. Nate dyed his hair purple [2]."
    found = check(answer, "What happened in 2022?", [JOURNAL, LETTER], [1, 2], owner="Joanna")
    assert found.behind == (1, 2)
    # Whom it is said of is read in the passage that holds it, not in the one cited.
    answer = "Your hair was dyed purple [1]."
    found = check(answer, "What color did I dye my hair?", [JOURNAL, LETTER], [1], owner="Joanna")
    assert found.why == "not about whom the question asks"
    # What no passage holds is caught as before; citing nothing, every passage is behind it.
    made_up = "Nate dyed his hair green in Prague with his cousins [1]."
    assert check(made_up, question, [JOURNAL, LETTER], [1], owner="Joanna").why == (
        "words the passages do not hold"
    )
    assert check("Hair dyed purple.", question, [JOURNAL, LETTER], [], owner="Joanna") == (
        Grounding(None)
    )


def test_a_list_items_number_is_no_fact() -> None:
    answer = "1. You finished your first screenplay.\n2. You printed it [1]."
    question = "What did I do in January 2022?"
    assert check(answer, question, [JOURNAL], [1], owner="Joanna").why is None


def test_another_persons_facts_do_not_answer_a_question_about_the_owner() -> None:
    # The letter greets Joanna, but the paragraph that holds the fact does not name her.
    answer = "Joanna dyed her hair purple [2]."
    question = "What color did Joanna dye her hair?"
    assert check(answer, question, [JOURNAL, LETTER], [2], owner="Joanna").why == (
        "not about whom the question asks"
    )
    # In the first person it is the owner's question too.
    question = "What color did I dye my hair?"
    assert check(answer, question, [JOURNAL, LETTER], [2], owner="Joanna").why == (
        "not about whom the question asks"
    )
    # A writer the model named answers for themself only.
    named = Read(2, LETTER.header, LETTER.text.replace("I dyed my", "Nate dyed Nate's"), NATE)
    question = "What color did Nate dye his hair?"
    assert check("Purple [2].", question, [JOURNAL, named], [2], owner="Joanna").why is None
    question = "What did Nate finish and print?"
    assert check(
        "Nate finished his first screenplay and printed it [1].",
        question,
        [JOURNAL, named],
        [1],
        owner="Joanna",
    ).why == ("not about whom the question asks")


def test_whom_a_question_is_about() -> None:
    assert people_asked_about("When did I move?", "Joanna", []) == {"Joanna"}
    assert people_asked_about("When did Joanna move?", "Joanna Smith", ["Nate"]) == {"Joanna Smith"}
    assert people_asked_about("Did Nate and Joanna meet?", "Joanna", ["Nate"]) == {
        "Joanna",
        "Nate",
    }
    assert people_asked_about("How do backups run?", None, []) == set()
    assert people_asked_about("What is Nate's project called?", "Joanna", ["Nate"]) == {"Nate"}


def test_a_letter_to_the_owner_answers_about_them() -> None:
    letter = Read(
        3,
        'Someone else (not you), 25 May 2022, in "Letters/Nate/2022-05-25":',
        "I got you a stuffed turtle to remind you of the good vibes.",
        SOMEONE,
    )
    question = "What did Nate get for me?"
    answer = "A stuffed turtle to remind you of the good vibes [3]."
    assert check(answer, question, [letter], [3], owner="Joanna").why is None


def test_a_one_word_answer_is_not_held_to_the_passages_words() -> None:
    # A count, or another word for what they say: too short to tell from a guess.
    question = "How many times was my screenplay printed?"
    assert check("Twice [1].", question, [JOURNAL], [1], owner="Joanna").why is None


def test_whom_a_sentence_is_about_is_read_in_the_paragraph_it_was_taken_from() -> None:
    letter = Read(
        4,
        'Someone else (not you), 24 June 2022, in "Letters/Nate/2022-06-24":',
        "I made vegan ice cream last Friday and shared it with people in my diet group.",
        SOMEONE,
    )
    journal = Read(5, JOURNAL.header, "People at the party made a lot of noise.", JOANNA)
    question = "What did Joanna share with her diet group?"
    answer = "Joanna made vegan ice cream last Friday and shared it with people."
    # Joanna's journal shares a word or two with it; the letter is where it comes from.
    assert check(answer, question, [letter, journal], [], owner="Joanna").why == (
        "not about whom the question asks"
    )


def test_a_passages_header_line_copied_is_no_answer() -> None:
    """What a small model asked something the passages do not say sometimes writes: the line
    kb puts above a passage."""
    copied = 'You, 21 January 2022, in "Joanna/Journal/2022-01-21": You watched a movie.'
    question = "What does Nate recommend for a comfy living room?"
    assert check(copied, question, [JOURNAL, LETTER], [], owner="Joanna").why == (
        "a passage's header line, not its words"
    )
    # Naming the note in other words is an answer like any other.
    named = "You watched a movie, as your journal of 21 January 2022 says [1]."
    assert check(named, "What did I watch?", [JOURNAL], [1], owner="Joanna").why is None


def test_a_folder_named_for_someone_makes_them_known_and_their_notes_theirs() -> None:
    """At the structure level kb knows no writer but the owner; a folder named for someone
    ("Letters/Nate") tells whose notes those are."""
    question = "What did Nate finish and print?"
    # The owner's journal says it of the owner, not of Nate.
    assert check(
        "Nate finished his first screenplay and printed it [1].",
        question,
        [JOURNAL, LETTER],
        [1],
        owner="Joanna",
    ).why == ("not about whom the question asks")
    # Nate's own letter answers for him.
    assert (
        check(
            "Nate dyed his hair purple [2].",
            "What did Nate dye?",
            [JOURNAL, LETTER],
            [2],
            owner="Joanna",
        ).why
        is None
    )
    # Someone else's letter does not, unless its paragraph names him (kb knows Nate by the
    # folders of the passages it gave).
    johns = Read(3, LETTER.header.replace("Nate", "John"), LETTER.text, SOMEONE)
    assert check(
        "Nate dyed his hair purple [3].",
        "What did Nate dye?",
        [JOURNAL, LETTER, johns],
        [3],
        owner="Joanna",
    ).why == ("not about whom the question asks")
    named = Read(3, johns.header, "Nate dyed his hair purple last week.", SOMEONE)
    assert (
        check(
            "Nate dyed his hair purple [3].",
            "What did Nate dye?",
            [JOURNAL, LETTER, named],
            [3],
            owner="Joanna",
        ).why
        is None
    )


def test_anyone_a_folder_of_the_vault_is_named_for_is_known_when_the_question_names_them() -> None:
    """Nate's own notes need not be among the passages for a question about him to be held
    to notes of his or that name him; a folder's name counts only written as a name."""
    question = "What did Nate finish and print?"
    answer = "Nate finished his first screenplay and printed it [1]."
    assert check(answer, question, [JOURNAL], [1], owner="Joanna").why is None
    assert check(answer, question, [JOURNAL], [1], owner="Joanna", folders={"Nate"}).why == (
        "not about whom the question asks"
    )
    # "screenplay" is a word of the question, not the name of the folder "Screenplay".
    answer = "Joanna finished her first screenplay and printed it [1]."
    folders = {"Screenplay"}
    question = "Who finished a screenplay?"
    assert check(answer, question, [JOURNAL], [1], owner="Joanna", folders=folders).why is None
