"""NeMo Gym 0.7's resources server machinery with Rubricate's `verify()` (in .venvs/nemo-gym):
a task's rollouts, verified one per call, are scored once as one group with their stage
components, and a judge failure reaches NeMo Gym as its failure outcome (masked,
`judge_failed`), not as a reward."""

import re
import socket

from tests.support.gateway import Running
from tests.trainers.conftest import driver

N = 4


def dead_url() -> str:
    """A loopback URL nobody listens on (a port bound, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


async def test_nemo_gym_verify_scores_a_group_with_components_and_masks_judge_failures(
    running: Running,
) -> None:
    out = await driver(
        "nemo-gym", "nemo_gym_driver.py", running.platform.urls["gateway"], dead_url()
    )
    assert out["status"] == [200] * (N + 2)
    group = out["group"]
    # the task's N rollouts, sent in N /verify calls, were scored once as one group
    sizes = [
        len(re.findall(r'<untrusted trajectory="\d+">', user))
        for schema, user in running.backend.calls
        if schema == "stage_rubrics"
    ]
    assert sizes == [N, 1]
    a, b, c, d = group
    assert a["reward"] == 1.0 and b["reward"] == 0.0 and c["reward"] == 0.5
    names = ["R_plan", "R_research", "R_review", "R_answer"]
    assert a["reward_components"] == dict.fromkeys(names, 1.0)
    assert b["reward_components"] == dict.fromkeys(names, 0.0)
    assert c["reward_components"] == dict.fromkeys(names, 0.5)
    assert all(r[k] == r["reward_components"][k] for r in (a, b, c) for k in names)
    assert all(not r["mask_sample"] and r["failure_kind"] is None for r in group)
    # an answer-only fallback: only R_answer is a component; the others are named unscored,
    # null at top level, never 0.0
    assert d["fallback"] is True and not d["mask_sample"]
    assert list(d["reward_components"]) == ["R_answer"]
    assert d["unscored_components"] == ["R_plan", "R_research", "R_review"]
    assert d["R_plan"] is None and d["R_answer"] == d["reward"]
    # the judge failed: NeMo Gym's failure outcome (its judge_failsafe), masked out, with
    # none of a verify response's reward fields (NeMo Gym's failsafe writes its own 0.0
    # placeholder into `reward` of the masked row)
    for failed, reason in (
        (out["failed"], "could not score"),
        (out["unreachable"], "rubricate gateway:"),
    ):
        assert failed["mask_sample"] is True
        assert failed["failure_kind"] == "judge_failed"
        assert failed["_ng_failure_class"] == "judge_failed"
        assert reason in failed["failure_reason"]
        assert "reward_components" not in failed and "R_answer" not in failed
