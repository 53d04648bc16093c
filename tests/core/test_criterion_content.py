"""What a criterion asks an answer to say (`core.criterion_content`), and grounding on it
(`core.assertions.ungrounded`): a positive rubric of the shape "(the answer) SAYS OBJECT" whose
object asks for three specific words or more, none of which any assertion shares, cannot be
met; every other criterion is left to the judge."""

import pytest

from rubricate.core.assertions import UnitReading, read_cues, split_units, ungrounded
from rubricate.core.criterion_content import MIN_SPECIFIC, asked, shares_word


def _read(text: str) -> UnitReading:
    units = read_cues(split_units(text), text=text)
    return UnitReading(tuple(u if u.kind else u.decided("assert", "test") for u in units))


def test_the_object_of_a_verb_of_saying_is_what_a_criterion_asks_for() -> None:
    wanted = asked("The answer describes a double helix of two strands.")
    assert wanted.words == {"double", "helix", "two", "strand"} and wanted.terms == 3
    assert wanted.groundable
    # subject, modal, adverbs and question form are the frame
    for criterion in (
        "Describes a double helix of two strands.",
        "The response should clearly describe a double helix of two strands.",
        "Does the answer describe a double helix of two strands?",
    ):
        assert asked(criterion) == wanted, criterion
    # a nugget sent as a rubric (`eval stagewise --nugget-rubrics`)
    nugget = asked("The answer states this fact: DNA is a double helix")
    assert nugget.words == {"dna", "double", "helix"} and nugget.groundable


@pytest.mark.parametrize(
    "criterion",
    [
        "The answer is concise.",  # the form of the answer: no verb of saying
        "Uses bullet points.",
        "Cites at least two sources.",
        "Avoids jargon and speculation.",
        "Explains the mechanism clearly and gives an example.",  # only frame and kinds
        "Explains the reason for the difference in outcome.",
        "Names it.",
        "d",
        "Latinos misinformed about education opportunities",  # a bare statement
        "The answer names Watson and Crick.",  # two words: left to the name rule
        "The answer states this fact: Stress",  # one word: a synonym would lose it
        "Says pound-force vs newton.",  # two words (a compound is one)
    ],
)
def test_a_criterion_of_another_shape_or_too_few_words_is_not_grounded_on_words(
    criterion: str,
) -> None:
    assert not asked(criterion).groundable, asked(criterion)
    padding = _read("Something else entirely happened here.")
    assert ungrounded(criterion, padding) == ungrounded(criterion, padding, by_words=False)


DNA = "The answer describes a double helix of two strands."


@pytest.mark.parametrize(
    ("answer", "grounded"),
    [
        ("Watson and Crick showed in 1953 that DNA is a double helix of two strands.", True),
        # a paraphrase that keeps one word is enough
        ("Its two chains twist around each other in a helix.", True),
        ("The molecule looks like a twisted ladder made of paired strands.", True),
        # padding, a hedge or a denial carries none of it as a claim
        ("Molecular biology is a subject that has interested people for a long time.", False),
        ("Perhaps it is a double helix of two strands.", False),
        ("It is not true that DNA is a double helix of two strands.", False),
        ("Gregor Mendel described it in 1866 as a single straight chain of proteins.", False),
    ],
)
def test_a_rubric_is_floored_only_when_no_assertion_shares_a_word_it_asks_for(
    answer: str, grounded: bool
) -> None:
    assert (ungrounded(DNA, _read(answer)) == "") is grounded
    assert ungrounded(DNA, _read(answer), by_words=False) == ""  # the rule before


@pytest.mark.parametrize(
    ("criterion", "answer"),
    [
        # near misses: right answers in other words that share one word, or that a kind of
        # content ("nature") carries
        (
            "The answer explains that thinner air at height reduces the temperature needed "
            "to boil.",
            "At altitude the air pressure is lower, so water boils below 100 degrees.",
        ),
        (
            "The answer states this fact: Intense desire to restore man to nature",
            "The Romantic Movement stressed a return to nature as a source of renewal.",
        ),
        (
            "Mentions the accidental observation of mould killing bacteria in a lab dish.",
            "Fleming saw that a Penicillium mould had killed the bacteria in a culture dish.",
        ),
        (
            "Correctly identifies that purpose-built compromise between rival cities.",
            "Canberra was built as a compromise between Sydney and Melbourne.",
        ),
    ],
)
def test_a_right_answer_that_paraphrases_keeps_its_rubric(criterion: str, answer: str) -> None:
    assert ungrounded(criterion, _read(answer)) == ""


def test_words_match_on_a_prefix_of_their_stems() -> None:
    assert shares_word({"discoverer"}, ["Fleming discovered it."])
    assert shares_word({"evaporation"}, ["Water evaporates."])
    assert not shares_word({"helix"}, ["A straight chain."])
    assert MIN_SPECIFIC == 3
