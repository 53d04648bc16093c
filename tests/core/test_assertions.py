"""Assertion units (`core.assertions`): how material is cut into units, what the closed-class
cues decide, and the evidence rule."""

import pytest

from rubricate.core.assertions import (
    Unit,
    UnitReading,
    check_evidence,
    creditable,
    cue_kind,
    names_in,
    read_cues,
    split_units,
    ungrounded,
)


def kinds(text: str) -> list[tuple[str | None, str]]:
    return [(u.kind, u.text) for u in read_cues(split_units(text), text=text)]


def test_units_have_stable_ids_and_offsets_into_the_text() -> None:
    text = (
        "Canberra is the capital.  It was a compromise; Parliament sat there in 1927.\n- An item."
    )
    units = split_units(text)
    assert [u.id for u in units] == ["u1", "u2", "u3", "u4"]
    assert [text[u.start : u.end] for u in units] == [u.text for u in units]
    assert units[3].text == "An item."
    assert [u.id for u in split_units(text, prefix="p2.u")][:2] == ["p2.u1", "p2.u2"]


def test_abbreviations_and_asides_do_not_end_a_unit() -> None:
    units = split_units(
        "Dr. J. Smith founded the U.S. firm (see Vol. 2. It grew.) in 1990. Then it moved."
    )
    assert [u.text for u in units] == [
        "Dr. J. Smith founded the U.S. firm (see Vol. 2. It grew.) in 1990.",
        "Then it moved.",
    ]


def test_a_short_label_opening_a_line_is_its_own_unit() -> None:
    assert kinds("Thought process: Let's solve this problem step by step.") == [
        ("meta", "Thought process:"),
        ("meta", "Let's solve this problem step by step."),
    ]


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("Was it 1989?", "question"),
        ("If the wall fell in 1989, Germany reunified in 1990.", "suppose"),
        ("A complete reply would mention the date of 9 November 1989.", "meta"),
        ("Textbooks would say that the wall fell in 1989.", "suppose"),
        ("I cannot confirm whether the wall fell in 1989.", "hedge"),
        ("It may have fallen in 1989.", "hedge"),
        ("Some historians claim that it fell in 1990.", "report"),
        ("It is not true that the wall fell in 1989.", "negate"),
        ("The claim that it fell in 1989 is a myth.", "negate"),
        ("Whoever says it fell in 1990 is mistaken.", "negate"),
        ("It fell in 1990, which is wrong.", "negate"),
        ("It fell in 1990 (this is false).", "negate"),
        ("The 1990 date is incorrect.", "negate"),
        ("Berlin being the capital in 1990 is a misconception.", "negate"),
        ("This answer has been double-checked.", "meta"),
        ("Verified against the official source: correct and complete.", "meta"),
        ("The expected answer mentions 1989.", "meta"),
        ("An editor's note confirms the date.", "meta"),
        ("The wall fell in 1989: covered.", "meta"),
        ("wall fell 1989 November Berlin crossing border", "meta"),
        (":", "meta"),
        ("Solution", "meta"),
        ("I will now list the causes.", "meta"),
        ("<answer>", "meta"),
        # the classes added on 2026-11-29 (issue 32, generalising beyond the tuning templates)
        ("I deny that the wall fell in 1989.", "negate"),  # a denial predicate
        ("The wall fell in 1989 — debunked.", "negate"),
        ("Conceivably the wall fell in 1989.", "hedge"),  # an epistemic adverb
        ("The wall fell in 1989 (unverified).", "hedge"),  # annotated as unsettled
        ("The wall fell in 1989: false.", "negate"),  # annotated as false
        ("Many held the idea that the wall fell in 1989.", "report"),  # a named proposition
        ("Each essential point about the wall is addressed above.", "meta"),  # deixis
        ("A good answer to the question covers the fall in 1989.", "meta"),  # a text's content
        ("What one would need to say here: the wall fell in 1989.", "suppose"),
        ("Checked: correct on every point, including that the wall fell in 1989.", "meta"),
        ("Award one mark for the date of 1989.", "meta"),  # a marking scheme
        ("Berlin, wall, 1989, November, crossing", "meta"),  # a list of terms
        ("| The wall fell in 1989 | ✓ |", "meta"),  # a table row with a verdict
        ('{"verdict": "correct", "year": 1989}', "meta"),  # structured data
        ('["Berlin", "wall", "1989"]', "meta"),
        ("It is hard to say, but the wall fell in 1989.", "hedge"),
        ("The wall fell in 1989, or so I am told.", "report"),
        ("Per the answer key, the wall fell in 1989.", "meta"),
        ("The ground truth: the wall fell in 1989.", "meta"),
        ("[x] The wall fell in 1989.", "meta"),  # a ticked checklist item
        ("~~The wall fell in 1989.~~", "negate"),  # struck through
        ("Berlin,wall,1989,November", "meta"),
        # the classes of the second round of 2026-11-29 (issue 32: hedges, echoes and
        # negation scope by structure, tuned on templates written fresh for it)
        ("There is a fair chance that the wall fell in 1989.", "hedge"),  # modal noun
        ("It is probable that the wall fell in 1989.", "hedge"),  # modal adjective
        ("That the wall fell in 1989 seems likely to me.", "hedge"),
        ("I believe the wall fell in 1989.", "hedge"),  # the author's belief
        ("My best guess is that the wall fell in 1989.", "hedge"),
        ("I'd lean towards 1989, tentatively.", "hedge"),
        ("It would appear that the wall fell in 1989.", "hedge"),  # evidential
        ("In time it will turn out that the wall fell in 1989.", "hedge"),  # irrealis
        ("November 1989 is one option.", "hedge"),  # a possibility as predicate
        ("Should it turn out that the wall fell in 1989, Germany reunified.", "suppose"),
        ("One could argue that the wall fell in 1989.", "suppose"),
        ("By some accounts the wall fell in 1989.", "report"),  # unnamed accounts
        ("Some folks will tell you that the wall fell in 1989.", "report"),
        ("I was once told that the wall fell in 1989.", "report"),  # hearsay
        ("The story goes that the wall fell in 1989.", "report"),
        ("It is a mistake to think that the wall fell in 1989.", "negate"),
        ("The wall fell in 1989: a common misconception.", "negate"),
        ("Remember to mention that the wall fell in 1989.", "meta"),  # told what to say
        ("Write that the wall fell in 1989.", "meta"),
        ("You asked if the wall fell in 1989.", "meta"),  # the question restated
        ("The prompt is looking for the fall of the wall in 1989.", "meta"),
        ("Anyone answering this should know that the wall fell in 1989.", "meta"),
        ("Criterion 2 — the wall fell in 1989.", "meta"),
        ("Credit goes to replies stating that the wall fell in 1989.", "meta"),
        ("What I said, that the wall fell in 1989, is right.", "meta"),  # own words
        ("I stand behind every word: the wall fell in 1989.", "meta"),
        ("Relevant terms include Berlin, wall, 1989.", "meta"),  # words as words
        # an expletive frame that does not assert its clause (round 3: the structure, not
        # the word: any frame but one of truth, knowledge, evidence, salience or necessity)
        ("It's conceivable that the wall fell in 1989.", "hedge"),
        ("It could well be that the wall fell in 1989.", "hedge"),
        ("There's a case to be made that the wall fell in 1989.", "hedge"),
        ("It seems fair to think that the wall fell in 1989.", "hedge"),
        # a probability as the subject, whatever its predicate
        ("Chances seem decent that the wall fell in 1989.", "hedge"),
        ("Odds favour the wall having fallen in 1989.", "hedge"),
        # what others would hold
        ("Some would place the fall of the wall in 1989.", "report"),
        # the author's own knowledge as a segment of the sentence, whatever it says
        ("The wall fell in 1989, unless my memory fails me.", "hedge"),
        ("As far as I know, the wall fell in 1989.", "hedge"),
        ("Best I can tell, the wall fell in 1989.", "hedge"),
        ("The wall fell in 1989 or thereabouts, I'd wager.", "hedge"),
        ("The wall fell in 1989, I'm sure.", "hedge"),
        ("To my knowledge, the wall fell in 1989.", "hedge"),
        ("The wall fell in 1989, if my memory serves.", "hedge"),
        # the author-as-answerer and a response with an adjective saying something
        ("Ideally one mentions that the wall fell in 1989.", "meta"),
        ("Students typically write that the wall fell in 1989.", "meta"),
        ("A strong response states the wall fell in 1989.", "meta"),
        ("Double-checked and accurate.", "meta"),
        # a proposition called a falsehood with an adjective
        ("The wall falling in 1989 is pure fiction.", "negate"),
        # round 4 (2026-11-29, late): a raising evidential; a condition on the claim's own
        # truth, saying nothing of its subject
        ("The wall appears to have fallen in 1989.", "hedge"),
        ("The wall would seem to date from 1961.", "hedge"),
        ("The wall fell in 1989, unless the textbooks are wrong.", "suppose"),
        ("The wall fell in 1989, subject to correction.", "suppose"),
        ("The wall fell in 1989, assuming the records are right.", "suppose"),
    ],
)
def test_cues_decide_what_a_sentence_does(text: str, kind: str) -> None:
    found = cue_kind(text)
    assert found is not None and found[0] == kind, found


@pytest.mark.parametrize(
    "text",
    [
        "The Berlin Wall fell on 9 November 1989.",
        "The treaty did not take effect until 1995.",  # "not until" asserts the date
        "Not only did the wall fall, the country reunified in May 1990.",
        "It was confirmed by Eddington in 1919.",  # a verdict on a named subject
        "Canberra",
        "East Germans, West Berliners, and guards met at the crossing.",
        # near misses of the 2026-11-29 classes: still claims
        "Mount Everest is 8,849 metres above sea level.",  # "above" as a preposition
        "Neil Armstrong, 1969",  # a short list may be a short answer
        "Despite laws prohibiting age-based employment discrimination, older workers often "
        "face unfavourable treatment.",  # no function word, but clauses, not terms
        "Limiting speech can hinder new ideas that contribute to culture.",  # a relative "that"
        "The fact that the wall fell in 1989 changed Europe.",  # factive
        "The solution contains sodium chloride.",  # a chemical solution is no answer
        # near misses of the second round of 2026-11-29: still claims
        "It is possible to see the wall from the hill.",  # ability, not epistemic
        "The probability that two people share a birthday passes 50 percent at 23 people.",
        "The museum is open on Sundays.",  # "open" with a complement
        "Solar power is another option for heating homes.",  # a recommendation
        "Note that water boils at a lower temperature at altitude.",  # an attention getter
        "Remember that the wall fell in 1989.",
        "Add that solution to the beaker slowly.",  # a demonstrative, not a clause
        "Anyone travelling to Nepal should carry warm clothes.",
        "Many people hold that view.",
        "Some cells hold water for weeks.",
        "In some cases the river floods twice a year.",
        "The story goes back to 1215.",
        "The word is derived from Latin.",
        "It looks like a twisted ladder.",
        "The vaccine was shown to be effective in 1955.",
        "The question of sovereignty was settled in 1990.",
        "The essential elements of a contract are offer, acceptance and consideration.",
        "Each claim was supported by various sources in 1990.",
        # the demo's right answers (make demo, 2026-11-29): a predicate of falsity about a
        # thing is a claim; a clause opened by a conjunction is no run of terms
        "It was lost because software produced data in pound-force seconds rather than the "
        "newton-seconds that navigation expected, so the trajectory was wrong.",
        "The units were incorrect.",
        "while JPL's navigation software expected newton-seconds [1].",
        # near misses of the third round (2026-11-29, night): still claims
        # frames that assert their clause, and clefts, stay claims
        "It is well established that the wall fell in 1989.",
        "It is important to note that the wall fell in 1989.",
        "It turns out that the wall fell in 1989.",
        "It was in 1989 that the wall fell.",
        "It was the crowds that opened the gates.",
        "There is strong evidence that the wall fell in 1989.",
        "There is no question that the wall fell in 1989.",
        "It should be noted that the wall fell in 1989.",
        "It is estimated that 140 people died at the wall.",
        "It is unfortunate that the wall stood until 1989.",
        "It is no surprise that the wall fell in 1989.",
        # a thing called an error or an invention is a claim about the thing
        "It was a unit conversion error.",
        "It was a remarkable invention.",
        # a probability named with its complement is a claim about it
        "The likelihood of rain in Berlin is low in November.",
        # a segment with the first person and content of the subject is no qualifier
        "As I travelled through Berlin in 1989, the wall fell.",
        "In my experience, the wall is the city's most visited site.",
        "The response of the government came in 1989.",
        # near misses of round 4: what is seen in a relative clause, a condition on the
        # subject, an elliptical condition
        "Victims receive emails that appear to be from their bank.",
        "The dose is 5 mg, if the patient weighs over 50 kg.",
        "Antibiotics cure the infection, unless the infection is viral.",
        "Few historians, if any, doubt the 1989 date.",
    ],
)
def test_plain_claims_have_no_cue(text: str) -> None:
    assert cue_kind(text) is None


def test_process_material_is_read_for_talk_about_the_text_only() -> None:
    assert cue_kind("Was the date 1989? Search for it.", reading="process") is None
    assert cue_kind("I will search for the date.", reading="process") is None
    assert cue_kind("This action meets every criterion above.", reading="process") is not None
    topic = frozenset({"berlin", "wall", "fall"})
    assert cue_kind("Let me search for when the wall fell.", reading="process", topic=topic) is None
    opener = cue_kind("Let's solve this problem step by step.", reading="process", topic=topic)
    assert opener is not None and opener[0] == "meta"
    assert cue_kind("Solution", reading="process") is not None
    # a search query is a run of words: an action, not a defect
    assert cue_kind("search('date Berlin Wall fell 9 November 1989')", reading="process") is None


def test_a_continuation_keeps_the_kind_of_the_clause_it_continues() -> None:
    text = "It is a myth that the wall fell in 1989, and a myth that crowds crossed that night."
    assert [k for k, _ in kinds(text)] == ["negate", "negate"]
    text = "The wall fell in 1989, and crowds crossed that night."
    assert [k for k, _ in kinds(text)] == [None, None]


def test_a_unit_that_only_retracts_the_clause_before_gives_it_its_kind() -> None:
    assert [k for k, _ in kinds("The wall fell in 1989. Wrong.")] == ["negate", "negate"]
    assert [k for k, _ in kinds("The wall fell in 1989. Maybe.")] == ["hedge", "hedge"]
    assert [k for k, _ in kinds("The wall fell in 1989, but don't hold me to it.")] == [
        "hedge",
        "negate",
    ]
    # a denial of something else, or a blank line between, retracts nothing
    text = "The wall fell in 1989. It did not fall in 1961."
    assert [k for k, _ in kinds(text)] == [None, "negate"]
    text = "The wall fell in 1961. I cannot confirm that it fell on 9 November 1989."
    assert [k for k, _ in kinds(text)] == [None, "hedge"]
    assert kinds("The wall fell in 1989.\n\nWrong.")[0][0] is None
    assert [k for k, _ in kinds("Canberra is the capital. No doubt about it.")] == [None, None]
    # "No." answers and ends a sentence ("No. 5" does not)
    assert kinds("Was it 1961? No. The wall fell in 1989.") == [
        ("question", "Was it 1961?"),
        ("meta", "No."),  # no content of its own
        (None, "The wall fell in 1989."),
    ]
    assert len(split_units("He lived at No. 5 Downing Street.")) == 1


def test_a_clause_that_withholds_commitment_qualifies_the_claims_it_speaks_of() -> None:
    # after the claim, in its sentence or the next, with nothing of the subject in it
    assert [k for k, _ in kinds("The wall fell in 1989, though I could be wrong.")] == [
        "hedge",
        "hedge",
    ]
    assert [k for k, _ in kinds("The wall fell in 1989. That's my guess anyway.")] == [
        "hedge",
        "hedge",
    ]
    # with a plural anaphor, every claim of its paragraph before it
    text = (
        "One reading: the wall fell in 1989. Another: it fell in 1991. I can't decide between them."
    )
    assert [k for k, _ in kinds(text)] == ["meta", "hedge", "hedge", "negate"]
    text = "The wall fell in 1989.\n\nThe gates opened. I can't decide between them."
    assert kinds(text)[0][0] is None
    # before the claim it concedes, in one sentence
    assert [k for k, _ in kinds("Nobody knows for sure, but the wall fell in 1989.")] == [
        "negate",
        "hedge",
    ]
    # the author's not having checked, with a reflexive pronoun
    text = "The wall fell in 1989, though I haven't verified it myself."
    assert [k for k, _ in kinds(text)] == ["hedge", "negate"]
    # a denial with content of its own retracts nothing
    assert [k for k, _ in kinds("The wall fell in 1989. It did not fall in 1961.")] == [
        None,
        "negate",
    ]
    # a label whose own words hedge governs its line
    assert [k for k, _ in kinds("My best guess: the wall fell in 1989.")] == ["hedge", "hedge"]


def test_units_under_a_label_about_the_answer_key_are_quoted_until_a_blank_line() -> None:
    text = (
        "The expected answer is: The wall fell in 1989. Crowds crossed.\n\nThe wall fell in 1961."
    )
    assert kinds(text) == [
        ("meta", "The expected answer is:"),
        ("report", "The wall fell in 1989."),
        ("report", "Crowds crossed."),
        (None, "The wall fell in 1961."),
    ]
    # a plain heading quotes nothing: the author's own answer follows it
    assert kinds("Answer: The wall fell in 1989.") == [
        ("meta", "Answer:"),
        (None, "The wall fell in 1989."),
    ]


def test_a_verdict_label_governs_the_rest_of_its_line() -> None:
    text = "False: The wall fell in 1989. It fell in November.\nThe wall fell in 1989."
    assert kinds(text) == [
        ("negate", "False:"),
        ("negate", "The wall fell in 1989."),
        ("negate", "It fell in November."),
        (None, "The wall fell in 1989."),
    ]
    assert [k for k, _ in kinds("Unverified: the wall fell in 1989.")] == ["hedge", "hedge"]
    assert [k for k, _ in kinds("Score: the wall fell in 1989.")] == ["meta", "meta"]
    assert [k for k, _ in kinds("Examiner: the wall fell in 1989.")] == ["report", "report"]


def test_a_column_of_single_words_is_no_sentence() -> None:
    text = "- Berlin\n- wall\n- 1989\n- November"
    assert {k for k, _ in kinds(text)} == {"meta"}
    assert [k for k, _ in kinds("- Berlin\n- Bonn\n- Hamburg")] == [None, None, None]


def reading(*units: tuple[str, str], mode: str = "claims") -> UnitReading:
    return UnitReading(
        tuple(
            Unit(f"u{i}", text, 0, len(text), kind, "test")  # type: ignore[arg-type]
            for i, (kind, text) in enumerate(units, start=1)
        ),
        mode,  # type: ignore[arg-type]
    )


def test_only_assertions_are_creditable_in_answers_and_all_but_meta_in_process() -> None:
    r = reading(("assert", "A."), ("hedge", "Maybe B."), ("meta", "All correct."))
    assert [u.id for u in r.asserted] == ["u1"] and r.has_assertion
    p = reading(("assert", "A."), ("question", "B?"), ("meta", "All met."), mode="process")
    assert [u.id for u in p.asserted] == ["u1", "u2"]
    assert not creditable(p.units[2], "process")
    assert not reading(("meta", ":"), ("negate", "Not A.")).has_assertion


def test_evidence_must_cite_assertions_that_hold_the_criterions_numbers() -> None:
    r = reading(
        ("assert", "The wall fell on 9 November 1989."),
        ("negate", "It did not fall in 1989."),
        ("assert", "Crowds crossed."),
    )
    wanted = "States that the wall fell on 9 November 1989."
    assert check_evidence(["u1"], r, numbers_of=wanted).valid
    assert not check_evidence([], r, numbers_of=wanted).valid
    assert "not assertions" in check_evidence(["u2"], r, numbers_of=wanted).why
    assert "unknown" in check_evidence(["u9"], r, numbers_of=wanted).why
    assert "lack" in check_evidence(["u3"], r, numbers_of=wanted).why
    assert check_evidence(["u3"], r, numbers_of="Says that crowds crossed.").valid


def test_citing_markup_beside_an_assertion_is_not_held_against_a_verdict() -> None:
    text = "<answer>\nThe wall fell on 9 November 1989.\n</answer>"
    r = UnitReading(
        tuple(
            u.decided("assert", "test") if u.kind is None else u
            for u in read_cues(split_units(text), text=text)
        )
    )
    assert [u.kind for u in r.units] == ["meta", "assert", "meta"]
    assert check_evidence(["u1", "u2"], r, numbers_of="9 November 1989").valid
    assert not check_evidence(["u1"], r, numbers_of="9 November 1989").valid


def test_names_are_capitalised_words_that_do_not_open_a_sentence() -> None:
    assert names_in("The answer names Canberra as the capital. Sydney lost.") == {"canberra"}
    assert names_in("Says lbf vs N.") == set()  # a unit symbol is not a name


@pytest.mark.parametrize(
    ("criterion", "answer", "grounded"),
    [
        ("The answer names Canberra as the capital.", "The capital is Canberra.", True),
        ("The answer names Canberra as the capital.", "Australia's capital is old.", False),
        # a hedge or a denial carries no content: the name there does not count
        ("The answer names Canberra as the capital.", "Perhaps it is Canberra.", False),
        ("Gives 9 November 1989 as the date.", "The wall fell on 9 November 1989.", True),
        ("Gives 9 November 1989 as the date.", "The wall fell in November.", False),
        # one of several names is enough: an answer need not repeat every one
        (
            "Explains Canberra as a compromise between Sydney and Melbourne.",
            "It split the difference between Sydney and its rival.",
            True,
        ),
        ("The answer is concise.", "Canberra.", True),  # names nothing: always groundable
    ],
)
def test_a_criterion_is_grounded_when_an_assertion_holds_what_it_names(
    criterion: str, answer: str, grounded: bool
) -> None:
    read = UnitReading(tuple(read_cues_decided(answer)))
    assert (ungrounded(criterion, read) == "") is grounded


def read_cues_decided(text: str) -> list[Unit]:
    return [
        u if u.kind is not None else u.decided("assert", "test")
        for u in read_cues(split_units(text), text=text)
    ]
