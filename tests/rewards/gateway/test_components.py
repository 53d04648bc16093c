"""Reward components on `/get_reward` (and the SDK over HTTP and gRPC): beside the scalar, the
per-stage rewards R_plan … R_answer, named and in a fixed order, and on request the per-rubric
scores; a score the platform does not have is null, never 0.0."""

import asyncio
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from rubricate.embedded import SERVICES, EmbeddedPlatform
from rubricate.gateway.settings import GatewaySettings
from rubricate.llm.base import GenerationParams
from rubricate.testing.fake_judge import FakeJudgeBackend, shown_units
from rubricate_client import AsyncClient, AsyncGrpcClient, RetryPolicy
from rubricate_client.schemas.rewards import STAGE_COMPONENTS, GetRewardResponse
from tests.support.gateway import Running, fast_llm

PROMPT = "<|user|>Why was the Mars Climate Orbiter lost?<|assistant|>"
_RUBRIC = re.compile(r"^(\d+)\. \((plan|research|review|answer)\)", re.M)
_STAGE_MARK = re.compile(r"\[\[(plan|research|review|answer)=([012])\]\]")


def staged_score_sheet(user: str, params: GenerationParams) -> str:
    """FAKE judge (orchestration tests only): scores each rubric from a per-stage marker in
    the trajectory, `[[plan=2]]` … `[[answer=0]]` (1 where a stage has none), so that the
    stages of one trajectory score differently; `[[fail-all]]` fails every call and
    `[[fail-stagewise]]` every call with a non-answer rubric, as the stock fake judge does."""
    head, _, material = user.partition("\nTrajectory:")
    numbered = _RUBRIC.findall(head.partition("Rubrics:")[2])
    from rubricate.llm.errors import TransportError

    if "[[fail-all]]" in material:
        raise TransportError("fake judge: scoring configured to fail")
    if "[[fail-stagewise]]" in material and any(stage != "answer" for _, stage in numbered):
        raise TransportError("fake judge: stagewise scoring configured to fail")
    marks = dict(_STAGE_MARK.findall(material))
    items = [
        {
            "index": int(i),
            "justification": "fake",
            "evidence": shown_units(material) if stage == "answer" else [],
            "score": int(marks.get(stage, "1")),
        }
        for i, stage in numbered
    ]
    return json.dumps({"scores": items})


def staged(plan: int, research: int, review: int, answer: int, extra: str = "") -> str:
    """A four-stage trajectory whose stages the staged fake judge scores as given (0-2)."""
    m = f"[[plan={plan}]] [[research={research}]] [[review={review}]] [[answer={answer}]] {extra}"
    return (
        f"<think>scope</think><structured_plan>plan {m}</structured_plan>"
        f'\n<call_tool name="search">q {m}</call_tool><tool_output>o</tool_output>'
        f"\n<think>audit</think><review>gaps {m}</review>"
        # the answer asserts something: the markers alone are a run of words, which the
        # answer's reading as units withholds (an answer of them would get the floor)
        f"\n<answer>The orbiter was lost to a unit mismatch. {m}</answer>"
    )


@pytest.fixture
async def staged_platform(tmp_path: Path) -> AsyncIterator[Running]:
    backend = FakeJudgeBackend(handlers={"score_sheet": staged_score_sheet})
    platform = EmbeddedPlatform(
        data_dir=tmp_path,
        ports=dict.fromkeys(SERVICES, 0),
        llm=fast_llm(),
        backend=backend,
        gateway=GatewaySettings(upstream_retries=0, max_body_bytes=200_000),
    )
    async with platform, httpx.AsyncClient(base_url=platform.urls["gateway"], timeout=30) as c:
        yield Running(platform=platform, backend=backend, client=c)


def body(*trajectories: str, labels: list[Any] | None = None, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "query": [PROMPT + t for t in trajectories],
        "prompts": [PROMPT] * len(trajectories),
        **extra,
    }
    if labels is not None:
        out["labels"] = labels
    return out


async def test_stage_components_are_named_ordered_and_null_where_unscored(
    staged_platform: Running,
) -> None:
    label = {"question": "Why was the orbiter lost?", "question_id": "mco-c"}
    response = await staged_platform.client.post(
        "/get_reward",
        json=body(
            staged(2, 0, 1, 2),
            staged(0, 2, 2, 1),
            staged(2, 2, 2, 2, "[[fail-stagewise]]"),  # scored on its answer only
            staged(1, 1, 1, 1, "[[fail-all]]"),  # not scored at all
            labels=[label] * 4,
        ),
    )
    assert response.status_code == 200, response.text
    out = response.json()
    assert [c["name"] for c in out["components"]] == list(STAGE_COMPONENTS)
    values = {c["name"]: c["values"] for c in out["components"]}
    assert values["R_plan"] == [1.0, 0.0, None, None]
    assert values["R_research"] == [0.0, 1.0, None, None]
    assert values["R_review"] == [0.5, 1.0, None, None]
    assert values["R_answer"] == [1.0, 0.5, 1.0, None]
    assert out["rewards"] == values["R_answer"]  # the scalar is still R_answer
    # the diagnostics keep their old meaning (0.0 where none): the components do not
    assert out["extra_logs"]["rubricate/R_plan"][3] == 0.0
    assert out["rubric_scores"] is None  # only on request


async def test_rubric_scores_on_request_per_sample_in_a_stable_order(
    staged_platform: Running,
) -> None:
    label = {
        "question": "Why was the orbiter lost?",
        "question_id": "mco-r",
        "rubrics": [
            {"title": "Names the unit mismatch", "description": "lbf vs N", "weight": 3},
            {
                "title": "Blames the crew",
                "description": "Says the crew caused it",
                "weight": 1,
                "polarity": "negative",
            },
        ],
    }
    response = await staged_platform.client.post(
        "/get_reward",
        json=body(
            staged(2, 0, 1, 2),
            staged(2, 2, 2, 0, "[[fail-stagewise]]"),
            labels=[label] * 2,
            rubric_scores=True,
        ),
    )
    assert response.status_code == 200, response.text
    out = GetRewardResponse.model_validate(response.json())
    assert out.rubric_scores is not None and len(out.rubric_scores) == 2
    first, fallback = out.rubric_scores
    stages = [str(r.stage) for r in first]
    order = ["plan", "research", "review", "answer"]
    assert stages == sorted(stages, key=order.index)  # stage order, then id
    for stage in order:
        ids = [r.id for r in first if r.stage == stage]
        assert ids == sorted(ids)
    assert [r.id for r in fallback] == [r.id for r in first]  # one set for the group
    by_title = {r.title: r for r in first}
    assert by_title["Names the unit mismatch"].score == 1.0
    assert by_title["Names the unit mismatch"].weight == 3.0
    # a negative rubric's 2 ("the flaw is there") is inverted: 0.0, higher is better
    assert by_title["Blames the crew"].polarity == "negative"
    assert by_title["Blames the crew"].score == 0.0
    plan = [r for r in first if r.stage == "plan"]
    assert plan and all(r.score == 1.0 for r in plan)
    research = [r for r in first if r.stage == "research"]
    assert research and all(r.score == 0.0 for r in research)
    # the answer-only fallback: its non-answer rubrics were not judged, null (not 0.0)
    assert all(r.score is None for r in fallback if r.stage != "answer")
    assert [r.score for r in fallback if r.title == "Names the unit mismatch"] == [0.0]


async def test_nugget_and_mixed_batches_name_their_components(running: Running) -> None:
    nugget_label = {
        "kind": "nugget",
        "question": "Why was the orbiter lost?",
        "nuggets": ["unit mismatch", {"text": "pound-force seconds", "importance": "okay"}],
    }
    stage_label = {"question": "Why was the orbiter lost?", "question_id": "mixed"}
    response = await running.client.post(
        "/get_reward",
        json={
            "query": [
                PROMPT + "The loss came from a unit mismatch in pound-force seconds.",
                PROMPT + staged(1, 1, 1, 1),
            ],
            "prompts": [PROMPT, PROMPT],
            "labels": [nugget_label, stage_label],
            "rubric_scores": True,
        },
    )
    assert response.status_code == 200, response.text
    out = GetRewardResponse.model_validate(response.json())
    assert [c.name for c in out.components] == [*STAGE_COMPONENTS, "nugget"]
    assert out.component("nugget") == [out.rewards[0], None]
    assert out.component("R_plan")[0] is None and out.component("R_plan")[1] is not None
    assert out.component("step") == [None, None]  # no step sample in the batch
    assert out.rubric_scores is not None
    nuggets = out.rubric_scores[0]
    assert [r.id for r in nuggets] == ["nugget-0", "nugget-1"]
    assert [r.weight for r in nuggets] == [1.0, 0.5]
    assert all(r.stage is None and r.score is not None for r in nuggets)
    assert all(r.stage is not None for r in out.rubric_scores[1])


async def test_a_group_gathered_from_separate_requests_gives_each_its_components(
    staged_platform: Running,
) -> None:
    """Two one-sample requests of one group (as veRL and OpenRLHF send them): the group is
    scored once, each request reads its own sample's components, and a retry of one reads
    the stored result, components and rubric scores included, with no judge call."""
    label = {"question": "Why?", "question_id": "gathered", "group_size": 2, "group_key": "k"}
    one = body(staged(2, 1, 0, 2), labels=[label], rubric_scores=True)
    two = body(staged(0, 1, 2, 0), labels=[label], rubric_scores=True)
    a, b = await asyncio.gather(
        staged_platform.client.post("/get_reward", json=one),
        staged_platform.client.post("/get_reward", json=two),
    )
    assert a.status_code == 200 and b.status_code == 200, (a.text, b.text)
    ca = GetRewardResponse.model_validate(a.json())
    cb = GetRewardResponse.model_validate(b.json())
    assert [ca.component(n)[0] for n in STAGE_COMPONENTS] == [1.0, 0.5, 0.0, 1.0]
    assert [cb.component(n)[0] for n in STAGE_COMPONENTS] == [0.0, 0.5, 1.0, 0.0]
    calls = len(staged_platform.backend.calls)
    kinds = [k for k, _ in staged_platform.backend.calls]
    assert kinds.count("stage_rubrics") == 1  # one group
    again = await staged_platform.client.post("/get_reward", json=one)
    assert again.status_code == 200
    assert GetRewardResponse.model_validate(again.json()) == ca
    assert len(staged_platform.backend.calls) == calls  # answered from the stored result


async def test_components_and_rubric_scores_are_the_same_over_http_and_grpc(
    staged_platform: Running,
) -> None:
    no_retry = RetryPolicy(max_retries=0)
    http = AsyncClient(staged_platform.platform.urls["gateway"], retry=no_retry)
    rpc = AsyncGrpcClient(staged_platform.platform.urls["gateway-grpc"], retry=no_retry)
    label = {"question": "Why?", "question_id": "both"}
    request = body(
        staged(2, 0, 1, 2),
        staged(1, 1, 1, 1, "[[fail-stagewise]]"),
        staged(1, 1, 1, 1, "[[fail-all]]"),
        labels=[label] * 3,
        rubric_scores=True,
    )
    async with http, rpc:
        over_http = await http.get_reward(request)
        over_grpc = await rpc.get_reward(request)  # the group's stored results, replayed
        # (the unscored sample is scored again, alone: its group_size log differs)
        assert over_grpc.rewards == over_http.rewards
        assert over_grpc.components == over_http.components
        assert over_grpc.rubric_scores == over_http.rubric_scores
        assert over_grpc.component("R_plan") == [1.0, None, None]
        assert over_grpc.rubric_scores is not None and len(over_grpc.rubric_scores) == 3
        assert over_grpc.rubric_scores[2] == []  # not scored: no rubric scores, no 0.0
        plain = await rpc.get_reward({**request, "rubric_scores": False})
        assert plain.rubric_scores is None and plain.components == over_http.components
