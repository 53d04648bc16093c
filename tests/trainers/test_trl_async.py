"""TRL 1.16's `AsyncGRPOTrainer.train()` (`trl.experimental.async_grpo`) with `RubricateReward`
against a real gateway (fake judge), in .venvs/trl: two optimizer steps, each on one whole
group scored once by the gateway, with the credit documented for this path (GRPO on
R_answer: AsyncGRPO sums its reward functions unweighted, so there is no decoupled
normalization), and the first `/get_reward` answer lost and replayed under its
Idempotency-Key. What runs for real and what is a stand-in (the vLLM server, the weight
transfer, the CUDA attention kernel): `drivers/trl_async_driver.py`."""

import json
import math
import os
import re
from pathlib import Path

import pytest

from tests.support.gateway import Running
from tests.trainers.conftest import ROOT, driver

N = 4
STEPS = 2
FIRST = "why was the orbiter lost"
MARKERS = set("abcdefgh")


def async_grpo_ready() -> None:
    """`.venvs/trl` with AsyncGRPO's HTTP clients (`make trainer-venvs`): skip without it,
    unless RUBRICATE_REQUIRE_TRAINER_VENVS is set."""
    if not (ROOT / ".venvs" / "trl" / ".async-grpo").exists():
        message = ".venvs/trl lacks AsyncGRPO's requests/aiohttp: run `make trainer-venvs`"
        if os.environ.get("RUBRICATE_REQUIRE_TRAINER_VENVS"):
            pytest.fail(message)
        pytest.skip(message)


def generation_sizes(running: Running) -> list[int]:
    """The number of trajectories in each rubric-generation call (one call per group)."""
    return [
        len(re.findall(r'<untrusted trajectory="\d+">', user))
        for schema, user in running.backend.calls
        if schema == "stage_rubrics"
    ]


def async_grpo(rewards: list[float | None]) -> list[float]:
    """TRL 1.16's AsyncGRPO advantage of one group (`_AsyncRolloutLoop._score_group`), written
    out: (r − mean) / (population std + 1e-8) over the scored completions; an unscored one
    (None → NaN) gets 0."""
    scored = [r for r in rewards if r is not None]
    mean = sum(scored) / len(scored)
    std = math.sqrt(sum((r - mean) ** 2 for r in scored) / len(scored))
    return [0.0 if r is None else (r - mean) / (std + 1e-8) for r in rewards]


def marker_of(tokens: list[str]) -> str:
    return tokens[tokens.index("</structured_plan>") - 1]


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_async_grpo_trains_two_steps_on_whole_groups_with_r_answer_credit(
    running: Running, tmp_path: Path, mode: str
) -> None:
    """`mode`: `RubricateReward` (run in a thread by TRL's worker) or `AsyncRubricateReward`
    (awaited on the worker's event loop)."""
    async_grpo_ready()
    out = await driver(
        "trl",
        "trl_async_driver.py",
        running.platform.urls["gateway"],
        str(tmp_path),
        mode,
        env={"OMP_NUM_THREADS": "1", "TRL_EXPERIMENTAL_SILENCE": "1"},
        limit_s=600,
    )
    assert out["global_step"] == STEPS
    # the trainer published its weights at start and after each step (to the fake server)
    assert out["weight_syncs"] == STEPS + 1 and out["weight_tensors"] > 0
    vocab: list[str] = out["vocab"]

    # ---- the reward path: one /get_reward per whole group, the first answer lost and replayed
    calls = [c for c in out["gateway_calls"] if c["path"] == "/get_reward"]
    assert len(calls) >= STEPS + 1  # the dropped first call, its retry, the second group, ...
    for call in calls:
        assert call["status"] == 200 and call["samples"] == N
        assert len(set(call["prompts"])) == 1  # TRL's worker scores a group whole, once
    first, retry = calls[0], calls[1]
    assert first["dropped"] and not retry["dropped"]
    assert first["prompts"][0] == FIRST and retry["prompts"] == first["prompts"]
    assert retry["key"] == first["key"] and retry["answer"] == first["answer"]
    # answered by the gateway's idempotency middleware from the stored first answer
    assert retry["replayed"] and not first["replayed"]
    assert not any(c["replayed"] for c in calls[2:])
    later = [c["key"] for c in calls[1:]]
    assert len(set(later)) == len(later)  # every other call is a new request
    # the judge generated rubrics once per group, with the whole group: the lost answer's
    # group was not scored twice
    sizes = generation_sizes(running)
    assert sizes and all(size == N for size in sizes), sizes
    assert len(set(later)) <= len(sizes) <= len(set(later)) + 1  # + one in flight at exit
    firsts = [
        user
        for schema, user in running.backend.calls
        if schema == "stage_rubrics" and FIRST in user
    ]
    assert len(firsts) == 1
    # the gateway's answers, by (prompt, completion): the reward is R_answer, null unscored
    gateway: dict[tuple[str, str], float | None] = {}
    for call in calls:
        answer = call["answer"]
        r_answer = next(c["values"] for c in answer["components"] if c["name"] == "R_answer")
        for i, (prompt, query) in enumerate(zip(call["prompts"], call["query"], strict=True)):
            reward = answer["rewards"][i]
            assert reward == r_answer[i]
            assert (reward is None) == (answer["extra_logs"]["rubricate/scored"][i] == 0.0)
            gateway[(prompt, query[len(prompt) :])] = reward

    # ---- what the trainer trained on: per step one whole group, TRL's advantages
    records = json.loads((tmp_path / "records.json").read_text())["records"]
    assert [r["step"] for r in records] == list(range(STEPS))
    groups = set()
    seen: dict[str, float | None] = {}
    for record in records:
        samples = record["samples"]
        assert len(samples) == N
        assert len({s["group_id"] for s in samples}) == 1  # one group per optimizer step
        group = samples[0]["group_id"]
        groups.add(group)
        prompt = out["questions"][group % len(out["questions"])]
        rewards = [None if math.isnan(s["reward"]) else s["reward"] for s in samples]
        # the reward TRL normalized is the gateway's (R_answer); unscored stays NaN, not 0.0
        for sample, reward in zip(samples, rewards, strict=True):
            text = " ".join(vocab[t] for t in sample["completion"] if vocab[t] != "</s>")
            assert gateway[(prompt, text)] == reward
            seen[marker_of(text.split())] = reward
        expected = async_grpo(rewards)
        assert [s["advantage"] for s in samples] == pytest.approx(expected, abs=1e-6)
        # the loss got that advantage on every completion token of the sample
        for sample, segment in zip(samples, record["segments"], strict=True):
            assert segment["targets"] == sample["completion"]
            assert segment["advantages"] == pytest.approx(
                [sample["advantage"]] * len(sample["completion"]), abs=1e-6
            )
    assert len(groups) == STEPS
    assert set(seen) == MARKERS  # SCRIPT[0] then SCRIPT[1]: both groups trained whole
    assert seen["a"] == 1.0 and seen["b"] == 0.0 and seen["c"] == 0.5 and seen["f"] == 1.0
    assert seen["d"] is not None  # an answer-only fallback: scored on R_answer
    assert seen["g"] is None  # unscored: advantage 0 above, never a made-up 0.0 reward
    logged = [e for e in out["log_history"] if "rewards/rubricate_stagewise" in e]
    assert len(logged) == STEPS
    # RubricateComponentRewards refuses AsyncGRPO's pickling, saying why
    assert "AsyncGRPOTrainer" in out["components_refused"]
    assert "RubricateReward" in out["components_refused"]
