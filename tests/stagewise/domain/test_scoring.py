import pytest

from rubricate.core.rubrics import contribution, make_rubric
from rubricate.stagewise.domain.scoring import RolloutJudgments, score_group, stage_score
from rubricate.stagewise.domain.ssgrpo import partial_advantages, partial_returns
from rubricate_client.schemas.rubrics import Judgment, Rubric, RubricSpec, Stage


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
    p1, p2 = first.advantages["plan"], second.advantages["plan"]
    assert p1 is not None and p2 is not None
    assert p1 > 0 > p2
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
    x1, x2 = a1["answer"], a2["answer"]
    assert x1 is not None and x2 is not None
    assert x1 == pytest.approx(-x2)


def test_stage_without_rubrics_is_reported_unscored() -> None:
    only_answer = [RUBRICS[3]]
    js = [Judgment(rubric_id=RUBRICS[3].id, stage="answer", score=2)]
    out = score_group(only_answer, [RolloutJudgments(missing=[], judgments=js)])
    assert out.unscored_stages == ["plan", "research", "review"]
    # issue 17: a stage with no rubric has no judgment: null, never a 0.0 a trainer could use
    assert out.rollouts[0].scores == {"plan": None, "research": None, "review": None, "answer": 1.0}


def test_missing_judgment_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="no judgment"):
        score_group(RUBRICS, [RolloutJudgments(missing=[], judgments=judged(2, 2, 2, 2, 2)[:2])])


def test_unscored_stage_is_null_and_excluded_from_returns_and_normalization() -> None:
    """Issue 17: a stage without rubrics is None in R, G and A for every rollout; the other
    stages' returns leave its term out and their advantages are normalized as usual."""
    only_answer = [RUBRICS[3]]
    rollouts = [
        RolloutJudgments(
            missing=[], judgments=[Judgment(rubric_id=RUBRICS[3].id, stage="answer", score=v)]
        )
        for v in (2, 0)
    ]
    out = score_group(only_answer, rollouts)
    for r in out.rollouts:
        assert r.scores is not None and r.returns is not None and r.advantages is not None
        for stage in ("plan", "research", "review"):
            assert r.scores[stage] is None
            assert r.returns[stage] is None
            assert r.advantages[stage] is None
    best, worst = out.rollouts
    assert best.returns is not None and best.returns["answer"] == 1.0
    assert best.advantages is not None and worst.advantages is not None
    assert best.advantages["answer"] == pytest.approx(1.0, abs=1e-3)
    assert worst.advantages["answer"] == pytest.approx(-1.0, abs=1e-3)


def test_answer_only_fallback_leaves_unscored_stages_null() -> None:
    only_answer = [RUBRICS[3]]
    js = [Judgment(rubric_id=RUBRICS[3].id, stage="answer", score=2)]
    out = score_group(
        only_answer, [RolloutJudgments(missing=[], judgments=js, outcome="answer_only")]
    )
    assert out.rollouts[0].scores == {"plan": None, "research": None, "review": None, "answer": 1.0}


def test_partial_advantages_normalize_each_stage_over_present_values() -> None:
    returns = [[1.0, None, 0.0, 1.0], [0.0, 0.5, None, 0.0], [None, 0.5, 1.0, 1.0]]
    adv = partial_advantages(returns)
    assert adv[2][0] is None and adv[0][1] is None and adv[1][2] is None
    assert adv[0][0] == pytest.approx(-(adv[1][0] or 0.0))
    assert adv[1][1] == adv[2][1] == 0.0  # equal present values: no advantage
    assert partial_returns([[None, None, None, 1.0]]) == [[None, None, None, 1.0]]
    assert partial_returns([[1.0, None, 0.5, 1.0]])[0][0] == pytest.approx(1.0 + 0.6 * 0.5 + 0.8)
