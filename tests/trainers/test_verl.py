"""veRL 0.9.1's own reward loop (`RewardLoopWorker`, one `run_single` per sample) with the
`rubricate` reward manager from veRL's registry, against a real gateway; then the manager's
`assemble_rm_scores` and the `rubricate_ssgrpo` estimator from veRL's registry."""

import re
from pathlib import Path

import pytest

from tests.support.gateway import Running
from tests.trainers.conftest import driver

N = 4
STAGE_ENDS = ("stage_end_plan", "stage_end_research", "stage_end_review", "stage_end_answer")


def generation_groups(running: Running) -> list[set[str]]:
    """The trajectories' markers in each rubric-generation call (one call per scored group)."""
    return [
        set(re.findall(r"final ([a-h]) ", user))
        for schema, user in running.backend.calls
        if schema == "stage_rubrics"
    ]


async def test_verl_reward_loop_scores_each_group_once_and_credits_stage_tokens(
    running: Running, tmp_path: Path
) -> None:
    out = await driver("verl", "verl_driver.py", running.platform.urls["gateway"], str(tmp_path))

    assert out["manager"] == "RubricateRewardManager"
    # identical reward_extra_info keys for every sample (veRL builds arrays from the first)
    assert len(out["key_sets"]) == 1
    assert set(STAGE_ENDS) <= set(out["key_sets"][0])
    assert out["extra"]["scored"] == [1.0] * 2 * N
    assert out["extra"]["group_size"] == [float(N)] * 2 * N
    assert out["extra"]["partial_group"] == [0.0] * 2 * N

    # the gateway gathered the one-sample requests: each group scored once, at full size
    groups = generation_groups(running)
    assert sorted(map(sorted, groups)) == [list("abcd"), list("efgh")]

    # each stage's reward sits on the stage's last response token
    for i, placed in enumerate(out["rm_nonzero"]):
        ends = [int(out["extra"][k][i]) for k in STAGE_ENDS]
        assert ends == sorted(ends) and min(ends) >= 0
        assert [j for j, _ in placed] == [j for j in ends if any(j == p for p, _ in placed)]
        mask = out["response_mask"][i]
        assert ends[-1] == sum(mask) - 1
        answer = dict(placed).get(ends[-1], 0.0)
        assert abs(answer - out["scores"][i]) < 1e-6

    # SS-GRPO: per-stage advantages, normalized per group; constant over each stage's tokens
    for i in range(2 * N):
        ends = [int(out["extra"][k][i]) for k in STAGE_ENDS]
        adv = out["advantages"][i]
        start = 0
        for end in ends:
            assert len({round(a, 6) for a in adv[start : end + 1]}) == 1
            start = end + 1
        assert all(a == 0.0 for a in adv[sum(out["response_mask"][i]) :])
    for g in range(2):
        rows = range(g * N, (g + 1) * N)
        for k in STAGE_ENDS:
            stage = [out["advantages"][i][int(out["extra"][k][i])] for i in rows]
            assert abs(sum(stage)) < 1e-4
    # the fake judge: sample a [[excellent]], b and e [[poor]], the others in between
    first = [out["advantages"][i][int(out["extra"]["stage_end_plan"][i])] for i in range(2 * N)]
    assert first[0] > 0 > first[1] and first[4] < 0 < first[5]
    assert out["scores"][0] > out["scores"][2] > out["scores"][1]
    # on veRL's scalar layout (its streamed path) the estimator is GRPO on R_answer
    assert out["scalar_spread"] > 0 and out["scalar_vs_grpo"] < 1e-5
    assert out["kl_refused"]


@pytest.mark.parametrize("function", ["compute_score", "compute_score_async"])
async def test_verl_reward_function_in_the_naive_manager_scores_whole_groups(
    running: Running, tmp_path: Path, function: str
) -> None:
    out = await driver(
        "verl", "verl_driver.py", running.platform.urls["gateway"], str(tmp_path), function
    )
    assert out["manager"] == "NaiveRewardManager"
    assert out["extra"]["scored"] == [1.0] * 2 * N
    assert out["extra"]["group_size"] == [float(N)] * 2 * N
    assert out["extra"]["partial_group"] == [0.0] * 2 * N
    assert len(out["extra"]["R_answer"]) == 2 * N
    groups = generation_groups(running)
    assert sorted(map(sorted, groups)) == [list("abcd"), list("efgh")]
