"""Derivations of worse trajectories: each kind changes what it should and nothing else."""

import json
from dataclasses import replace
from pathlib import Path

import pytest

from rubricate.evaluation.build_stagewise_set import build_case, build_set
from rubricate.evaluation.degrade import (
    KINDS,
    Case,
    Sentence,
    ToolCall,
    VitalFact,
    answer_text,
    delete_stage,
    derive,
    insert_wrong_fact,
    remove_vital_fact,
    render,
    render_sentence,
    split_sentences,
    strip_citations,
    truncate_answer,
)
from rubricate.evaluation.stagewise import SHIPPED_SET, case_from_json, case_to_json, load_cases
from rubricate.stagewise.domain.stages import parse_stages

RAG24 = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "rag24-nuggets-dev.jsonl"

CASE = Case(
    topic_id="t1",
    question="q?",
    plan="<think>p</think>\n<structured_plan>plan</structured_plan>",
    research=(ToolCall("q1", "Alpha one. Beta two."), ToolCall("q2", "Gamma three.")),
    review="<think>r</think>\n<review>ok</review>",
    answer=(
        Sentence("Alpha is one.", (1,)),
        Sentence("Beta is two.", (1,)),
        Sentence("Gamma is three and more words here.", (2,)),
    ),
    vital=(VitalFact("alpha one", 0), VitalFact("gamma three", 2)),
)
OTHER = replace(
    CASE,
    topic_id="t2",
    answer=(Sentence("Delta is four.", (1,)), Sentence("Epsilon is five.", (1,))),
    vital=(VitalFact("epsilon five", 1),),
)


def same_but(case: Case, other: Case, *fields: str) -> None:
    for name in ("topic_id", "question", "plan", "research", "review", "answer"):
        if name not in fields:
            assert getattr(case, name) == getattr(other, name), name


def test_render_has_every_stage_and_citations() -> None:
    text = render(CASE)
    assert parse_stages(text).missing == []
    assert 'Alpha is one <cite id="1">[1]</cite>.' in text
    assert "<tool_output>[2] Gamma three.</tool_output>" in text
    assert render_sentence(Sentence("No punctuation", (3,))).endswith('<cite id="3">[3]</cite>')
    # the space left where the source's citations were removed is absorbed
    assert render_sentence(Sentence("reliability .", (2,))) == (
        'reliability <cite id="2">[2]</cite>.'
    )


def test_split_sentences_keeps_the_text() -> None:
    text = "Pew is trusted. It was founded in 2004. Rates fell to 10% . Still fine!"
    parts = split_sentences(text)
    assert parts == [
        "Pew is trusted.",
        "It was founded in 2004.",
        "Rates fell to 10% .",
        "Still fine!",
    ]
    assert " ".join(parts) == text


def test_vital_fact_removed_drops_only_its_sentence() -> None:
    v = remove_vital_fact(CASE, index=1)
    assert v.kind == "vital_fact_removed"
    same_but(v.case, CASE, "answer")
    assert v.case.answer == CASE.answer[:2]
    assert v.case.vital == (VitalFact("alpha one", 0),)
    first = remove_vital_fact(CASE, index=0).case
    assert first.answer == CASE.answer[1:]
    assert first.vital == (VitalFact("gamma three", 1),)  # index shifted


def test_wrong_fact_inserted_adds_one_cited_sentence() -> None:
    v = insert_wrong_fact(CASE, fact="Delta is four.", source_topic="t2", position=2)
    same_but(v.case, CASE, "answer")
    assert v.case.answer == (
        CASE.answer[0],
        CASE.answer[1],
        Sentence("Delta is four.", (1,)),
        CASE.answer[2],
    )
    assert v.case.vital == (VitalFact("alpha one", 0), VitalFact("gamma three", 3))
    with pytest.raises(ValueError):
        insert_wrong_fact(CASE, fact="x", source_topic="t2", position=0)


def test_citations_stripped_keeps_the_words() -> None:
    v = strip_citations(CASE)
    same_but(v.case, CASE, "answer")
    assert [s.text for s in v.case.answer] == [s.text for s in CASE.answer]
    assert all(not s.cites for s in v.case.answer)
    assert answer_text(v.case) == "Alpha is one. Beta is two. Gamma is three and more words here."
    assert "<cite" not in render(v.case)


def test_answer_truncated_keeps_the_first_half_of_the_words() -> None:
    half = truncate_answer(CASE)  # 13 words -> 6: exactly the first two sentences
    same_but(half.case, CASE, "answer")
    assert half.case.answer == CASE.answer[:2]
    assert half.case.vital == (VitalFact("alpha one", 0),)
    v = truncate_answer(CASE, fraction=0.7)  # 9 words: cut inside the third sentence
    words = answer_text(strip_citations(CASE).case).split()
    assert answer_text(v.case).replace(' <cite id="1">[1]</cite>', "").split() == words[:9]
    assert v.case.answer[:2] == CASE.answer[:2]
    assert v.case.answer[2] == Sentence("Gamma is three")  # cut mid-sentence, citation gone
    assert v.case.vital == (VitalFact("alpha one", 0),)
    same_but(v.case, CASE, "answer")


@pytest.mark.parametrize("stage", ["plan", "research", "review"])
def test_stage_deleted_removes_exactly_that_stage(stage: str) -> None:
    v = delete_stage(CASE, stage=stage)  # type: ignore[arg-type]
    assert getattr(v.case, stage) is None
    same_but(v.case, CASE, stage)
    assert parse_stages(render(v.case)).missing == [stage]
    assert v.detail == stage


def test_derive_is_seeded_and_takes_wrong_facts_from_other_topics() -> None:
    variants = derive(CASE, others=[CASE, OTHER], seed=3)
    assert [v.kind for v in variants] == list(KINDS)
    assert derive(CASE, others=[CASE, OTHER], seed=3) == variants
    wrong = variants[1].case.answer
    inserted = [s for s in wrong if s not in CASE.answer]
    assert [s.text for s in inserted] == ["Epsilon is five."]  # OTHER's vital sentence
    choices = {
        (
            derive(CASE, others=[OTHER], seed=s)[4].detail,
            derive(CASE, others=[OTHER], seed=s)[0].detail,
        )
        for s in range(20)
    }
    assert len(choices) > 1
    # kinds that cannot apply are left out
    bare = replace(
        CASE, answer=(Sentence("Only."),), vital=(), plan=None, research=None, review=None
    )
    assert derive(bare, others=[bare], seed=0) == []
    assert [v.kind for v in derive(CASE, others=[], seed=0, kinds=["citations_stripped"])] == [
        "citations_stripped"
    ]


def test_json_round_trip() -> None:
    assert case_from_json(case_to_json(CASE)) == CASE
    bad = case_to_json(CASE) | {"vital": [{"nugget": "x", "sentence": 9}]}
    with pytest.raises(ValueError):
        case_from_json(bad)


RECORD = {  # first sentences of a real RAG24 record (topic 2024-109837, GPT-4o answer)
    "topic_id": "2024-109837",
    "question": "is pew research trustworthy",
    "answer": "Pew Research Center is widely regarded as a trustworthy source of information. "
    "Established in 2004, Pew Research Center is a nonprofit, nonpartisan research organization "
    "that conducts public opinion surveys on a wide range of issues. Additionally, Pew Research "
    "Center's information is often used by fact-checkers to verify data, further underscoring "
    "its reliability . Pew Research Center is known for its independence, objectivity, "
    "accuracy, rigor, humility, transparency, and innovation.",
    "nuggets": [
        {"text": "Established in 2004", "importance": "vital", "label": "support"},
        {
            "text": "Nonprofit, nonpartisan research organization",
            "importance": "vital",
            "label": "support",
        },
        {"text": "Used by fact-checkers", "importance": "vital", "label": "support"},
        {
            "text": "Funded by The Pew Charitable Trusts",
            "importance": "vital",
            "label": "not_support",
        },
        {"text": "Known for independence", "importance": "okay", "label": "support"},
    ],
}


def test_build_case_keeps_the_real_answer_verbatim() -> None:
    case = build_case(RECORD)
    assert " ".join(s.text for s in case.answer) == RECORD["answer"]
    assert [v.sentence for v in case.vital] == [1, 2]  # one vital fact per sentence
    assert case.research is not None
    assert " ".join(c.output for c in case.research) == RECORD["answer"]
    assert [s.cites for s in case.answer] == [(1,), (1,), (1,), (2,)]
    assert parse_stages(render(case)).missing == []
    assert build_set([RECORD], n=5) == [case]


def test_shipped_set_is_real_rag24_text() -> None:
    cases = load_cases(SHIPPED_SET)
    assert 10 <= len(cases) <= 20
    assert len({c.topic_id for c in cases}) == len(cases)
    for case in cases:
        assert parse_stages(render(case)).missing == []
        assert len(case.vital) >= 2
        assert len(derive(case, others=cases, seed=0)) == len(KINDS)
    if not RAG24.exists():
        pytest.skip("the RAG24 dev file is not here")
    source = {}
    with RAG24.open() as fh:
        for line in fh:
            rec = json.loads(line)
            source[rec["topic_id"]] = rec
    for case in cases:
        assert " ".join(s.text for s in case.answer) == source[case.topic_id]["answer"].strip()
        assert case == build_case(source[case.topic_id])
