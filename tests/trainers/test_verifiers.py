"""verifiers 0.4 (in .venvs/verifiers) with Rubricate's judge plugged into a task config: an
example's rollouts, each scored by verifiers' own `Task.score`, are scored once as one group,
the components land as metrics (null where unscored), and a judge failure or an unreachable
gateway is the rollout's failure (`task_error`, the reward `None`), not a reward."""

import re

from tests.support.gateway import Running
from tests.trainers.conftest import driver
from tests.trainers.test_nemo_gym import dead_url

N = 4
STAGES = ["R_plan", "R_research", "R_review", "R_answer"]


async def test_verifiers_judge_scores_a_group_and_fails_rollouts_on_judge_failure(
    running: Running,
) -> None:
    out = await driver(
        "verifiers", "verifiers_driver.py", running.platform.urls["gateway"], dead_url()
    )
    sizes = [
        len(re.findall(r'<untrusted trajectory="\d+">', user))
        for schema, user in running.backend.calls
        if schema == "stage_rubrics"
    ]
    assert sizes == [N, 1]  # the example's N rollouts as one group; the failing one alone
    a, b, c, d = out["group"]
    assert all(t["ok"] and t["stop_condition"] is None for t in out["group"])
    for trace, score in ((a, 1.0), (b, 0.0), (c, 0.5)):
        assert trace["rewards"] == {"rubricate": {"score": score, "weight": 1.0}}
        assert trace["reward"] == score
        assert {k: trace["metrics"][f"rubricate/{k}"] for k in STAGES} == dict.fromkeys(
            STAGES, score
        )
        assert trace["metrics"]["rubricate/fallback"] == 0.0
    # an answer-only fallback: the unjudged stages are null metrics, never 0.0
    assert d["metrics"]["rubricate/fallback"] == 1.0
    assert [d["metrics"][f"rubricate/{k}"] for k in STAGES[:3]] == [None] * 3
    assert d["metrics"]["rubricate/R_answer"] == d["rewards"]["rubricate"]["score"]
    # the judge failed / the gateway is down: the rollout failed, its reward did not run
    for failed, reason in (
        (out["failed"], "could not score"),
        (out["unreachable"], "rubricate gateway:"),
    ):
        assert failed["ok"] is False
        assert failed["stop_condition"] == "task_error"
        assert failed["rewards"] == {"rubricate": None}
        assert "RubricateJudgeError" in failed["errors"][0] and reason in failed["errors"][0]
