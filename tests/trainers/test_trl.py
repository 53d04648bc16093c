"""TRL 1.16's `GRPOTrainer.train()` with `RubricateReward` against a real gateway, in one
process and in two (torchrun), where one prompt's completions are split across ranks."""

import re
from pathlib import Path

import pytest

from tests.support.gateway import Running
from tests.trainers.conftest import driver

N = 4
STEPS = 2


def generation_sizes(running: Running) -> list[int]:
    """The number of trajectories in each rubric-generation call (one call per group)."""
    return [
        len(re.findall(r'<untrusted trajectory="\d+">', user))
        for schema, user in running.backend.calls
        if schema == "stage_rubrics"
    ]


@pytest.mark.parametrize("processes", [1, 2])
async def test_trl_grpo_trains_with_whole_groups(
    running: Running, tmp_path: Path, processes: int
) -> None:
    launcher: tuple[str, ...] = ()
    if processes > 1:
        launcher = ("-m", "torch.distributed.run", "--nproc_per_node", str(processes))
    out = await driver(
        "trl",
        "trl_driver.py",
        running.platform.urls["gateway"],
        str(tmp_path),
        str(N // processes),
        launcher=launcher,
        env={"OMP_NUM_THREADS": "1"},
    )
    assert out["global_step"] == STEPS
    assert out["world_size"] == processes
    # one prompt of N completions per step: each step's group scored once, with all N
    sizes = generation_sizes(running)
    assert sizes == [N] * STEPS, running.backend.calls
    # per-stage scores and the scored/fallback flags through TRL's `log_metric`, every step
    logged = [e for e in out["log_history"] if "rubricate/scored" in e]
    assert len(logged) == STEPS
    for entry in logged:
        for key in ("rubricate/scored", "rubricate/fallback", "rubricate/R_answer"):
            assert 0.0 <= entry[key] <= 1.0
        assert entry["rubricate/group_size"] == N and entry["rubricate/partial_group"] == 0.0
