"""The gRPC mirror of the nugget, step, reflection/bank and mining endpoints: each called over
both transports of the SDK against one running platform (fake judges) gives the same answer;
and `/get_reward` serves the nugget and step reward kinds."""

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from rubricate.embedded import SERVICES, EmbeddedPlatform, free_port
from rubricate.gateway.settings import GatewaySettings
from rubricate.testing.fake_judge import FakeJudgeBackend
from rubricate_client import APIError, AsyncClient, AsyncGrpcClient, RetryPolicy
from tests.reflections.gateway.test_api import reflection
from tests.steps.gateway.test_api import TRAJECTORY as STEP_TRAJECTORY
from tests.support.gateway import fast_llm, trajectory

QUESTION = "Why was the Mars Climate Orbiter lost?"
NO_RETRY = RetryPolicy(max_retries=0)
VOLATILE = {"total_s", "timing", "usage", "created_at", "updated_at", "id"}
"""Wall times, generated ids and timestamps, and LLM usage (the fake nugget judge varies its
reply format from call to call, so token counts differ)."""


@dataclass
class Both:
    http: AsyncClient
    rpc: AsyncGrpcClient
    backend: FakeJudgeBackend


@pytest.fixture
async def both(tmp_path: Path) -> AsyncIterator[Both]:
    backend = FakeJudgeBackend()  # its defaults answer every task kind
    platform = EmbeddedPlatform(
        data_dir=tmp_path,
        ports=dict.fromkeys(SERVICES, 0),
        llm=fast_llm(),
        backend=backend,
        gateway=GatewaySettings(upstream_retries=0),
    )
    async with (
        platform,
        AsyncClient(platform.urls["gateway"], retry=NO_RETRY) as http,
        AsyncGrpcClient(platform.urls["gateway-grpc"], retry=NO_RETRY) as rpc,
    ):
        yield Both(http=http, rpc=rpc, backend=backend)


def stable(value: Any) -> Any:
    """A response as JSON without wall times and generated ids/timestamps."""
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json", by_alias=True)
    if isinstance(value, dict):
        return {k: stable(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [stable(v) for v in value]
    return value


async def same(both: Both, method: str, *args: Any) -> Any:
    over_http = await getattr(both.http, method)(*args)
    over_grpc = await getattr(both.rpc, method)(*args)
    assert type(over_http) is type(over_grpc)
    assert stable(over_grpc) == stable(over_http), method
    return over_grpc


NUGGETS = [
    {"text": "A unit mismatch between pound-force and newtons", "importance": "vital"},
    {"text": "The orbiter burned up in the atmosphere", "importance": "okay"},
]
ANSWER = "A unit mismatch between pound-force and newtons: software used the wrong units."


async def test_nuggets_verify_and_batch(both: Both) -> None:
    one = await same(
        both, "verify_nuggets", {"question": QUESTION, "answer": ANSWER, "nuggets": NUGGETS}
    )
    assert 0.0 < one.reward < 1.0 and one.nuggets[0].label == "support"
    batch = await same(
        both,
        "verify_nuggets_batch",
        {
            "items": [
                {"question": QUESTION, "answer": ANSWER, "nuggets": NUGGETS},
                {"question": QUESTION, "answer": "[[verifier-down]]", "nuggets": NUGGETS},
            ]
        },
    )
    assert batch.rewards[0] == one.reward and batch.rewards[1] is None
    assert batch.items[1].error is not None and batch.failed == 1


async def test_steps_segment_rubric_verify_score_rank(both: Both) -> None:
    segmented = await same(both, "segment_steps", {"trajectory": STEP_TRAJECTORY})
    assert [s.kind for s in segmented.steps] == ["tool", "tool", "final"]
    rubric = await same(both, "step_rubric", {"question": QUESTION, "history": "", "k": 3})
    verdict = await same(
        both,
        "verify_step",
        {
            "question": QUESTION,
            "action": "[[c1]] search",
            "rubric": {"criteria": [c.model_dump() for c in rubric.criteria]},
        },
    )
    assert verdict.passed is True and verdict.verdicts[0].satisfied
    scored = await same(
        both, "score_steps", {"question": QUESTION, "trajectory": STEP_TRAJECTORY, "outcome": 0.9}
    )
    assert sum(s.reward or 0.0 for s in scored.steps) == pytest.approx(0.9)
    ranked = await same(
        both,
        "rank",
        {"question": QUESTION, "candidates": ["[[q=1]] a", "[[q=3]] b", "[[q=2]] c"], "seed": 7},
    )
    assert ranked.consensus[0] == [1] or ranked.consensus[0] == 1 or ranked.consensus


async def test_reflections_and_bank(both: Both) -> None:
    group = await both.http.score_stagewise(
        {
            "question": QUESTION,
            "rollouts": [
                {"id": "good", "trajectory": trajectory("[[excellent]]")},
                {"id": "bad", "trajectory": trajectory("[[poor]]")},
            ],
        }
    )
    scored = await both.rpc.score_reflections(
        {
            "question": QUESTION,
            "trajectory": trajectory("[[poor]]"),
            "scoring_id": group.scoring_id,
            "rollout_id": "bad",
            "candidates": [reflection("[[u=4]]"), "no blocks at all"],
        }
    )
    assert [c.status for c in scored.candidates] == ["scored", "invalid_format"]
    assert scored.bank.written
    retrieved = await same(both, "retrieve_bank", {"question": QUESTION, "mode": "within"})
    assert len(retrieved.items) == 1 and "<reference_examples>" in retrieved.block


async def test_mining_jobs_and_corpora(both: Both) -> None:
    corpora = await same(both, "list_corpora")
    assert corpora.corpora == []
    errors = []
    for client in (both.http, both.rpc):
        with pytest.raises(APIError) as caught:
            await client.get_job("no-such-job")
        errors.append(caught.value)
    assert errors[0].status == errors[1].status == 404
    assert errors[1].grpc_code == "NOT_FOUND" and errors[0].type == errors[1].type


async def test_get_reward_nugget_and_step_kinds(both: Both) -> None:
    labels = [
        {"kind": "nugget", "question": QUESTION, "nuggets": [n["text"] for n in NUGGETS]},
        {"kind": "nugget", "question": QUESTION, "nuggets": NUGGETS},
        {"kind": "step", "question": QUESTION, "outcome": 0.9},
        {"kind": "nugget", "question": QUESTION, "nuggets": NUGGETS},
    ]
    body = {
        "query": [ANSWER, ANSWER, STEP_TRAJECTORY, "[[verifier-down]]"],
        "prompts": ["", "", "", ""],
        "labels": labels,
    }
    out = await same(both, "get_reward", body)
    one = await both.http.verify_nuggets(
        {"question": QUESTION, "answer": ANSWER, "nuggets": NUGGETS}
    )
    assert out.rewards[1] == one.reward
    # step: the mean of the steps' rubric scores (0.5, 0.0, 1.0 with the fake judges)
    assert out.rewards[2] == pytest.approx(0.5)
    assert out.extra_logs["rubricate/scored"] == [1.0, 1.0, 1.0, 0.0]
    assert out.extra_logs["rubricate/steps"][2] == 3.0
    with pytest.raises(APIError) as caught:
        await both.http.get_reward({"query": ["x"], "labels": [{"kind": "nugget"}]})
    assert caught.value.status == 422 and caught.value.field == "labels[0].nuggets"


async def test_a_configured_grpc_port_is_honoured_with_any_http_ports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`rubricate serve all --port N` (non-default HTTP ports) still binds gRPC where
    RUBRICATE_GATEWAY_GRPC_PORT says (issue 16), instead of a random free port."""
    port = free_port()
    monkeypatch.setenv("RUBRICATE_GATEWAY_GRPC_PORT", str(port))
    platform = EmbeddedPlatform(
        data_dir=tmp_path,
        ports=dict.fromkeys(SERVICES, 0),
        backend=FakeJudgeBackend(),
    )
    async with platform:
        assert platform.urls["gateway-grpc"].endswith(f":{port}")
