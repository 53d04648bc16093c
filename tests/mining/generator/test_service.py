"""The rubric-generator's mining tasks against scripted fake backends (named as fakes):
parsing, the paper's limits (≤ 3 operations, exact label counts), repair, flagged failure."""

import json
from collections.abc import Iterator

import httpx
import pytest

from rubricate.llm.base import GenerationParams
from rubricate.llm.errors import OutputParseError
from rubricate.llm.server import TaskSettings
from rubricate.llm.settings import LLMSettings
from rubricate.mining.generator.schemas import (
    NuggetExtractionRequest,
    NuggetImportanceRequest,
    NuggetMergeRequest,
    QueryRewritesRequest,
)
from rubricate.mining.generator.service import MiningGenerationService
from rubricate.rubric_generator.app import create_app
from rubricate.testing.fake_judge import FakeJudgeBackend

FAST = LLMSettings(max_retries=1, backoff_base_s=0.001, backoff_max_s=0.002)
Q = "How does the json module encode Python objects?"


def scripted(task: str, *replies: object) -> FakeJudgeBackend:
    """A fake backend answering `task` with the given replies in turn."""
    queue: Iterator[object] = iter(replies)

    def answer(_: str, __: GenerationParams) -> str:
        reply = next(queue)
        return reply if isinstance(reply, str) else json.dumps(reply)

    return FakeJudgeBackend(handlers={task: answer})


def service(backend: FakeJudgeBackend) -> MiningGenerationService:
    return MiningGenerationService(backend=backend, tasks=TaskSettings(), llm=FAST)


async def test_rewrites_keep_at_most_three_operations_and_the_requested_count() -> None:
    backend = scripted(
        "query_rewrites",
        {
            "queries": [
                {"operations": ["synonym_replacement"] * 4, "query": "json encoder"},
            ]
        },
        {
            "queries": [
                {
                    "operations": ["hyponym_replacement", "hyponym_replacement"],
                    "query": " json.dumps ",
                },
                {"operations": ["constraint_modification"], "query": "json in Python 3.11"},
                {"operations": ["interrogative_switch"], "query": "why json"},
            ]
        },
    )
    out = await service(backend).query_rewrites(
        QueryRewritesRequest(question=Q, query=Q, passage="The json module ...", max_queries=2)
    )
    assert [(q.query, q.operations) for q in out.queries] == [
        ("json.dumps", ["hyponym_replacement"]),
        ("json in Python 3.11", ["constraint_modification"]),
    ]
    assert out.usage.calls == 2  # the first reply broke the three-operation rule: repaired
    prompt = backend.calls[0][1]
    assert "The json module" in prompt and "at most 2 queries" in prompt


async def test_extraction_may_return_nothing() -> None:
    out = await service(scripted("nugget_extraction", {"nuggets": ["  ", ""]})).extract(
        NuggetExtractionRequest(question=Q, passage="Unrelated text.", max_nuggets=3)
    )
    assert out.nuggets == []


async def test_merge_groups_use_zero_based_ids_and_drop_singletons() -> None:
    backend = scripted(
        "nugget_merge",
        {"groups": [{"ids": [1, 3], "nugget": "merged"}, {"ids": [2], "nugget": "alone"}]},
    )
    out = await service(backend).merge(NuggetMergeRequest(question=Q, nuggets=["a", "b", "c"]))
    assert [(g.text, g.ids) for g in out.groups] == [("merged", [0, 2])]


async def test_merge_ids_out_of_range_fail_after_one_repair() -> None:
    bad = {"groups": [{"ids": [1, 9], "nugget": "x"}]}
    with pytest.raises(OutputParseError) as err:
        await service(scripted("nugget_merge", bad, bad)).merge(
            NuggetMergeRequest(question=Q, nuggets=["a", "b"])
        )
    assert err.value.usage.calls == 2


async def test_importance_needs_one_label_per_nugget() -> None:
    backend = scripted("nugget_importance", {"labels": ["vital"]}, {"labels": ["vital", "okay"]})
    out = await service(backend).importance(NuggetImportanceRequest(question=Q, nuggets=["a", "b"]))
    assert out.labels == ["vital", "okay"] and out.usage.calls == 2


async def test_a_judge_failure_is_an_error_with_usage_over_http() -> None:
    bad = {"labels": ["vital", "essential"]}
    app = create_app(llm=FAST, backend=scripted("nugget_importance", bad, bad))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            response = await client.post(
                "/v1/tasks/nugget-importance", json={"question": Q, "nuggets": ["a", "b"]}
            )
    assert response.status_code == 502
    error = response.json()["error"]
    assert error["type"] == "judge_output_invalid"
    assert error["usage"]["calls"] == 2
