"""Whether an answer says only what its passages say (pure)."""

from __future__ import annotations

from kb.search.grounding import Read, people_asked_about, unsupported
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
    assert unsupported(answer, question, [JOURNAL, LETTER], [1], owner="Joanna") is None
    # The question's own words may be repeated.
    answer = "Nate dyed his hair purple the week before 15 April 2022 [2]."
    question = "When did Nate dye his hair?"
    assert unsupported(answer, question, [JOURNAL, LETTER], [2], owner="Joanna") is None


def test_words_numbers_and_months_from_nowhere_are_caught() -> None:
    question = "What did Joanna print?"
    made_up = "Joanna printed a novel about dragons and wizards in Prague [1]."
    assert unsupported(made_up, question, [JOURNAL], [1], owner="Joanna") == (
        "words the passages do not hold"
    )
    assert unsupported(
        "You printed your screenplay 3 times [1].", question, [JOURNAL], [1], owner="Joanna"
    ) == ("a number the passages do not give")
    assert unsupported(
        "You printed your screenplay in March [1].", question, [JOURNAL], [1], owner="Joanna"
    ) == ("a month the passages do not give")


def test_only_the_cited_passages_hold_an_answer_that_cites() -> None:
    answer = "Your hair was dyed purple [1]."
    question = "What did Nate do last week?"
    assert unsupported(answer, question, [JOURNAL, LETTER], [1], owner="Joanna") == (
        "words the passages do not hold"
    )
    # Citing nothing, it is checked against every passage.
    assert unsupported("Hair dyed purple.", question, [JOURNAL, LETTER], [], owner="Joanna") is None


def test_another_persons_facts_do_not_answer_a_question_about_the_owner() -> None:
    # The letter greets Joanna, but the paragraph that holds the fact does not name her.
    answer = "Joanna dyed her hair purple [2]."
    question = "What color did Joanna dye her hair?"
    assert unsupported(answer, question, [JOURNAL, LETTER], [2], owner="Joanna") == (
        "not about whom the question asks"
    )
    # In the first person it is the owner's question too.
    question = "What color did I dye my hair?"
    assert unsupported(answer, question, [JOURNAL, LETTER], [2], owner="Joanna") == (
        "not about whom the question asks"
    )
    # A writer the model named answers for themself only.
    named = Read(2, LETTER.header, LETTER.text.replace("I dyed my", "Nate dyed Nate's"), NATE)
    question = "What color did Nate dye his hair?"
    assert unsupported("Purple [2].", question, [JOURNAL, named], [2], owner="Joanna") is None
    question = "What did Nate finish and print?"
    assert unsupported(
        "Nate finished his first screenplay and printed it [1].",
        question,
        [JOURNAL, named],
        [1],
        owner="Joanna",
    ) == ("not about whom the question asks")


def test_whom_a_question_is_about() -> None:
    assert people_asked_about("When did I move?", "Joanna", []) == {"Joanna"}
    assert people_asked_about("When did Joanna move?", "Joanna Smith", ["Nate"]) == {"Joanna Smith"}
    assert people_asked_about("Did Nate and Joanna meet?", "Joanna", ["Nate"]) == {
        "Joanna",
        "Nate",
    }
    assert people_asked_about("How do backups run?", None, []) == set()


def test_a_letter_to_the_owner_answers_about_them() -> None:
    letter = Read(
        3,
        'Someone else (not you), 25 May 2022, in "Letters/Nate/2022-05-25":',
        "I got you a stuffed turtle to remind you of the good vibes.",
        SOMEONE,
    )
    question = "What did Nate get for me?"
    answer = "A stuffed turtle to remind you of the good vibes [3]."
    assert unsupported(answer, question, [letter], [3], owner="Joanna") is None


def test_a_one_word_answer_is_not_held_to_the_passages_words() -> None:
    # A count, or another word for what they say: too short to tell from a guess.
    question = "How many times was my screenplay printed?"
    assert unsupported("Twice [1].", question, [JOURNAL], [1], owner="Joanna") is None


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
    assert unsupported(answer, question, [letter, journal], [], owner="Joanna") == (
        "not about whom the question asks"
    )


def test_a_passages_header_line_copied_is_no_answer() -> None:
    """What a small model asked something the passages do not say sometimes writes: the line
    kb puts above a passage."""
    copied = 'You, 21 January 2022, in "Joanna/Journal/2022-01-21": You watched a movie.'
    question = "What does Nate recommend for a comfy living room?"
    assert unsupported(copied, question, [JOURNAL, LETTER], [], owner="Joanna") == (
        "a passage's header line, not its words"
    )
    # Naming the note in other words is an answer like any other.
    named = "You watched a movie, as your journal of 21 January 2022 says [1]."
    assert unsupported(named, "What did I watch?", [JOURNAL], [1], owner="Joanna") is None
