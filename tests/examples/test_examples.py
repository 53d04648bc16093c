"""Each example in examples/ runs end to end against an in-process platform with the FAKE
judge (`--fake-judge`): the wiring a trainer uses works as documented."""

import asyncio
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.gateway import Running, running
from tests.trainers.conftest import trainer_python

__all__ = ["running"]  # the fixture, for the examples that run in a trainer's virtualenv

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

CASES = {
    "openrlhf_remote_rm.py": ["rewards [1.0, 0.5, 0.0, 0.5]", "scored [1.0, 1.0, 1.0, 1.0]"],
    "verl_reward.py": ["'score': 1.0", "compute_score_batch scores -> [1.0, 0.5, 0.0]"],
    "trl_grpo.py": ["rewards [1.0, 0.5, 0.0, None]"],
    "stagewise_tokens.py": ["rollout 0: R={'plan': 1.0", "first/last advantages -1.225"],
}


@pytest.mark.parametrize(("script", "expected"), CASES.items(), ids=list(CASES))
def test_example_runs(script: str, expected: list[str], tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / script), "--fake-judge"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    for line in expected:
        assert line in done.stdout, done.stdout


def test_stagewise_tokens_over_grpc(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / "stagewise_tokens.py"), "--fake-judge", "--grpc"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "first/last advantages 1.225 / 1.225" in done.stdout


# ------------------------------------------------------------------ environment stacks
# Their examples need the library (NeMo Gym, verifiers), which lives in its own virtualenv
# (`make trainer-venvs`), not in the project's: each runs there with `--url` against an
# in-process platform with the FAKE judge (the `running` fixture).

LIBRARY_CASES = {
    "nemo_gym_resources_server.py": (
        "nemo-gym",
        [
            "[[excellent]]        reward 1.0  components {'R_plan': 1.0, 'R_research': 1.0, "
            "'R_review': 1.0, 'R_answer': 1.0}  unscored []",
            "(plain)              reward 0.5",
            "[[poor]]             reward 0.0",
            "unscored ['R_plan', 'R_research', 'R_review']",
            "[[fail-all]]         mask_sample True  failure_kind judge_failed  "
            "reward_components None",
        ],
    ),
    "verifiers_rubric.py": (
        "verifiers",
        [
            "[[excellent]]        reward 1.0  metrics {'R_plan': 1.0, 'R_research': 1.0, "
            "'R_review': 1.0, 'R_answer': 1.0}",
            "(plain)              reward 0.5",
            "[[poor]]             reward 0.0",
            "metrics {'R_plan': None, 'R_research': None, 'R_review': None, 'R_answer': ",
            "[[fail-all]]         ok False  stop_condition task_error  reward None",
        ],
    ),
}


@pytest.mark.parametrize(("script", "case"), LIBRARY_CASES.items(), ids=list(LIBRARY_CASES))
async def test_library_example_runs(
    script: str, case: tuple[str, list[str]], running: Running, tmp_path: Path
) -> None:
    venv, expected = case
    python = trainer_python(venv)
    done = await asyncio.to_thread(
        subprocess.run,
        [str(python), str(EXAMPLES / script), "--url", running.platform.urls["gateway"]],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    for line in expected:
        assert line in done.stdout, done.stdout
    # the example's rollouts were scored as one group (one rubric generation with all four),
    # the failing one as a group of its own
    sizes = [
        len(re.findall(r'<untrusted trajectory="\d+">', user))
        for schema, user in running.backend.calls
        if schema == "stage_rubrics"
    ]
    assert sizes == [4, 1]
