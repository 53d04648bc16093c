"""A trainer's reward call end to end on the real embedded model: an OpenRLHF-style batch over
gRPC (`Trainer/GetReward`), scored by Qwen2.5-Coder-1.5B Q4_K_M on CPU. Slow."""

import json
from pathlib import Path

import pytest

from rubricate.demo import load_example
from rubricate.embedded import SERVICES, EmbeddedPlatform
from rubricate_client import AsyncGrpcClient, RetryPolicy

pytestmark = pytest.mark.model


async def test_get_reward_over_grpc_with_the_embedded_model(tmp_path: Path) -> None:
    group = load_example()
    by_id = {r["id"]: r for r in group["rollouts"]}
    responses = [by_id["thorough"]["trajectory"], by_id["wrong"]["trajectory"]]
    prompt = f"Question: {group['question']}\n"
    label = json.dumps(
        {
            "question": group["question"],
            "question_id": "e2e-trainer",
            "rubrics": group.get("persistent_rubrics", []),
        }
    )
    platform = EmbeddedPlatform(data_dir=tmp_path, ports=dict.fromkeys(SERVICES, 0))
    async with (
        platform,
        AsyncGrpcClient(
            platform.urls["gateway-grpc"], timeout_s=1800, retry=RetryPolicy(max_retries=0)
        ) as client,
    ):
        out = await client.get_reward(
            {
                "query": [prompt + r for r in responses],
                "prompts": [prompt, prompt],
                "labels": [label, label],
            }
        )
    assert out.extra_logs["rubricate/scored"] == [1.0, 1.0]
    assert all(0.0 <= r <= 1.0 for r in out.rewards) and out.scores == out.rewards
    assert out.rewards == out.extra_logs["rubricate/R_answer"]
    # the judge must see that "a fuel line ruptured" is worse than the right answer
    assert out.rewards[0] > out.rewards[1]
