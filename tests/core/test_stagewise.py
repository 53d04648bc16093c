import pytest

from rubricate.core.rubrics import Judgment, Rubric, RubricSpec, Stage, contribution, make_rubric
from rubricate.core.stagewise import RolloutJudgments, score_group, stage_score


def r(title: str, stage: Stage, *, weight: int = 1, negative: bool = False) -> Rubric:
    spec = RubricSpec(
        title=title,
        description=title,
        weight=weight,
        polarity="negative" if negative else "positive",
    )
    return make_rubric(stage=stage, spec=spec, origin="active")


RUBRICS = [
    r("p", "plan"),
    r("s", "research"),
    r("v", "review"),
    r("a1", "answer", weight=3),
    r("a2", "answer", weight=1, negative=True),
]


def judged(*scores: int) -> list[Judgment]:
    return [
        Judgment(rubric_id=rb.id, stage=rb.stage, score=s)
        for rb, s in zip(RUBRICS, scores, strict=True)
    ]


def test_contribution_inverts_negatives() -> None:
    assert contribution(score=2, polarity="positive") == 1.0
    assert contribution(score=0, polarity="negative") == 1.0
    assert contribution(score=1, polarity="negative") == 0.5


def test_weighted_stage_score() -> None:
    js = {j.rubric_id: j for j in judged(2, 2, 2, 2, 2)}
    # a1 full (w3) and a2 shows the flaw fully (w1, inverted to 0) -> 3/4
    assert stage_score(RUBRICS, js, stage="answer") == pytest.approx(0.75)


def test_group_scores_and_variances() -> None:
    out = score_group(
        RUBRICS,
        [
            RolloutJudgments(missing=[], judgments=judged(2, 2, 2, 2, 0)),
            RolloutJudgments(missing=[], judgments=judged(0, 0, 0, 0, 2)),
        ],
    )
    first, second = out.rollouts
    assert first.scores == {"plan": 1.0, "research": 1.0, "review": 1.0, "answer": 1.0}
    assert second.scores == {"plan": 0.0, "research": 0.0, "review": 0.0, "answer": 0.0}
    assert first.advantages is not None and second.advantages is not None
    assert first.advantages["plan"] > 0 > second.advantages["plan"]
    assert out.variances[RUBRICS[0].id] == pytest.approx(0.25)
    assert out.unscored_stages == []


def test_missing_stage_scores_the_configured_value_and_is_not_judged() -> None:
    js = [j for j in judged(2, 2, 2, 2, 0) if j.stage != "review"]
    out = score_group(
        RUBRICS,
        [
            RolloutJudgments(missing=["review"], judgments=js),
            RolloutJudgments(missing=[], judgments=judged(2, 2, 2, 2, 0)),
        ],
        missing_stage_score=0.0,
    )
    assert out.rollouts[0].scores is not None and out.rollouts[0].scores["review"] == 0.0
    # the rubric's variance only counts rollouts that were judged on it
    assert RUBRICS[2].id not in out.variances


def test_answer_only_fallback_broadcasts_the_answer_score() -> None:
    answer_js = [j for j in judged(0, 0, 0, 2, 0) if j.stage == "answer"]
    out = score_group(
        RUBRICS,
        [
            RolloutJudgments(missing=[], judgments=answer_js, outcome="answer_only"),
            RolloutJudgments(missing=[], judgments=judged(1, 1, 1, 1, 1)),
        ],
    )
    assert out.rollouts[0].scores == dict.fromkeys(("plan", "research", "review", "answer"), 1.0)


def test_failed_rollout_is_left_out_of_normalization() -> None:
    out = score_group(
        RUBRICS,
        [
            RolloutJudgments(missing=[], judgments=[], outcome="failed"),
            RolloutJudgments(missing=[], judgments=judged(2, 2, 2, 2, 0)),
            RolloutJudgments(missing=[], judgments=judged(0, 0, 0, 0, 2)),
        ],
    )
    assert out.rollouts[0].scores is None and out.rollouts[0].advantages is None
    a1, a2 = out.rollouts[1].advantages, out.rollouts[2].advantages
    assert a1 is not None and a2 is not None
    assert a1["answer"] == pytest.approx(-a2["answer"])


def test_stage_without_rubrics_is_reported_unscored() -> None:
    only_answer = [RUBRICS[3]]
    js = [Judgment(rubric_id=RUBRICS[3].id, stage="answer", score=2)]
    out = score_group(only_answer, [RolloutJudgments(missing=[], judgments=js)])
    assert out.unscored_stages == ["plan", "research", "review"]
    assert out.rollouts[0].scores == {"plan": 0.0, "research": 0.0, "review": 0.0, "answer": 1.0}


def test_missing_judgment_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="no judgment"):
        score_group(RUBRICS, [RolloutJudgments(missing=[], judgments=judged(2, 2, 2, 2, 2)[:2])])
