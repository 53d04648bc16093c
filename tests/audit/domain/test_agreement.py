import pytest

from rubricate.audit.domain.agreement import (
    best,
    compare_group,
    kendall_tau,
    rollout_reward,
    rubric_agreement,
    stage_deltas,
)
from rubricate_client.schemas.rubrics import Stage

Stages = dict[str, dict[Stage, float | None]]


def test_rubric_agreement_is_one_minus_half_the_mean_absolute_difference() -> None:
    live = {"a": {"r1": 2.0, "r2": 0.0}, "b": {"r1": 1.0, "r2": 2.0}}
    reference = {"a": {"r1": 2.0, "r2": 2.0}, "b": {"r1": 0.0}}
    out = {r.rubric_id: r for r in rubric_agreement(live, reference)}
    assert out["r1"].rollouts == 2
    assert out["r1"].agreement == pytest.approx(1 - 0.5 / 2)
    assert out["r1"].exact == 0.5
    assert out["r1"].live_mean == 1.5 and out["r1"].reference_mean == 1.0
    # r2 only judged by both on rollout a: opposite ends of the scale
    assert out["r2"].rollouts == 1 and out["r2"].agreement == 0.0


def test_a_rollout_or_rubric_judged_by_one_side_only_is_not_compared() -> None:
    live = {"a": {"r1": 2.0}, "b": {"r1": 0.0}}
    reference = {"a": {"r1": 2.0}}
    [only] = rubric_agreement(live, reference)
    assert only.rollouts == 1 and only.agreement == 1.0


def test_stage_deltas_skip_stages_without_a_score_on_either_side() -> None:
    live: Stages = {"a": {"plan": 0.5, "answer": 1.0, "review": None}, "b": {"plan": 0.25}}
    reference: Stages = {"a": {"plan": 0.75, "answer": 0.5, "review": 0.5}, "b": {"plan": 0.75}}
    deltas = stage_deltas(live, reference)
    assert deltas["plan"] == pytest.approx((0.25 + 0.5) / 2)
    assert deltas["answer"] == pytest.approx(-0.5)
    assert deltas["review"] is None and deltas["research"] is None


def test_kendall_tau_matches_known_values() -> None:
    assert kendall_tau([1, 2, 3, 4], [1, 2, 3, 4]) == 1.0
    assert kendall_tau([1, 2, 3, 4], [4, 3, 2, 1]) == -1.0
    # one discordant pair out of six: (5 - 1) / 6
    assert kendall_tau([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(4 / 6)
    # tau-b with ties: scipy.stats.kendalltau([1, 2, 2, 3], [1, 2, 3, 3]) = 0.8
    assert kendall_tau([1, 2, 2, 3], [1, 2, 3, 3]) == pytest.approx(0.8)


def test_kendall_tau_is_undefined_for_one_item_or_all_ties() -> None:
    assert kendall_tau([1.0], [2.0]) is None
    assert kendall_tau([1, 1, 1], [1, 2, 3]) is None
    with pytest.raises(ValueError):
        kendall_tau([1, 2], [1])


def test_rollout_reward_and_best() -> None:
    assert rollout_reward({"plan": 0.5, "answer": 1.0, "review": None}) == 0.75
    assert rollout_reward({"plan": None}) is None
    assert best({"a": 1.0, "b": 1.0, "c": 0.5}) == ["a", "b"]
    assert best({}) == []


def test_compare_group_reports_a_changed_best_rollout_and_rank_disagreement() -> None:
    live_stages: Stages = {"a": {"answer": 1.0}, "b": {"answer": 0.5}, "c": {"answer": 0.0}}
    reference_stages: Stages = {"a": {"answer": 0.0}, "b": {"answer": 0.5}, "c": {"answer": 1.0}}
    out = compare_group(
        live_rubrics={"a": {"r": 2.0}, "b": {"r": 1.0}, "c": {"r": 0.0}},
        reference_rubrics={"a": {"r": 0.0}, "b": {"r": 1.0}, "c": {"r": 2.0}},
        live_stages=live_stages,
        reference_stages=reference_stages,
    )
    assert out.kendall_tau == -1.0
    assert out.best_changed is True
    assert out.live_best == ["a"] and out.reference_best == ["c"]
    assert out.agreement == pytest.approx(1 - (2 + 0 + 2) / 3 / 2)
    assert out.stage_deltas["answer"] == pytest.approx(0.0)


def test_compare_group_with_the_same_judgments_agrees_fully() -> None:
    stages: Stages = {"a": {"answer": 1.0, "plan": 0.5}, "b": {"answer": 0.5, "plan": 0.5}}
    rubrics = {"a": {"r": 2.0, "p": 1.0}, "b": {"r": 1.0, "p": 1.0}}
    out = compare_group(
        live_rubrics=rubrics,
        reference_rubrics=rubrics,
        live_stages=stages,
        reference_stages=stages,
    )
    assert out.agreement == 1.0 and out.kendall_tau == 1.0 and out.best_changed is False
    assert all(d == 0.0 for d in out.stage_deltas.values() if d is not None)


def test_compare_group_without_rewarded_rollouts_has_no_best_and_no_tau() -> None:
    out = compare_group(
        live_rubrics={},
        reference_rubrics={},
        live_stages={"a": {"answer": None}},
        reference_stages={"a": {"answer": 0.5}},
    )
    assert out.best_changed is None and out.kendall_tau is None and out.agreement is None
