"""The verifier's mining judgments against scripted fake backends (named as fakes)."""

import json
from collections.abc import Iterator

import pytest

from rubricate.llm.base import GenerationParams
from rubricate.llm.errors import OutputParseError
from rubricate.llm.server import TaskSettings
from rubricate.llm.settings import LLMSettings
from rubricate.mining.verifier.schemas import QueryDuplicateRequest, TemporalCheckRequest
from rubricate.mining.verifier.service import MiningJudgeService
from rubricate.testing.fake_judge import FakeJudgeBackend

FAST = LLMSettings(max_retries=1, backoff_base_s=0.001, backoff_max_s=0.002)


def scripted(task: str, *replies: object) -> FakeJudgeBackend:
    """A fake backend answering `task` with the given replies in turn."""
    queue: Iterator[object] = iter(replies)

    def answer(_: str, __: GenerationParams) -> str:
        return json.dumps(next(queue))

    return FakeJudgeBackend(handlers={task: answer})


def service(backend: FakeJudgeBackend) -> MiningJudgeService:
    return MiningJudgeService(backend=backend, tasks=TaskSettings(), llm=FAST)


@pytest.mark.parametrize(
    ("reply", "satisfied"),
    [
        ({"constraint": "strict", "satisfied": False}, False),
        ({"constraint": "backward_extension", "satisfied": True}, True),
        # a query without a time constraint accepts every passage, whatever the flag says
        ({"constraint": "none", "satisfied": False}, True),
    ],
)
async def test_temporal_check(reply: dict[str, object], satisfied: bool) -> None:
    backend = scripted("temporal_check", reply)
    out = await service(backend).temporal_check(
        TemporalCheckRequest(query="floods in Asia in 2015", passage="In 2009, rivers rose.")
    )
    assert out.satisfied is satisfied and out.constraint == reply["constraint"]
    assert "floods in Asia in 2015" in backend.calls[0][1]


async def test_duplicate_check_names_the_existing_query() -> None:
    out = await service(
        scripted("query_duplicate", {"similar_to": 2, "duplicate": True})
    ).query_duplicate(
        QueryDuplicateRequest(query="elderly individuals", existing=["json", "older people"])
    )
    assert out.duplicate is True and out.similar_to == 1


async def test_duplicate_check_rejects_a_number_outside_the_list() -> None:
    bad = {"similar_to": 5, "duplicate": True}
    with pytest.raises(OutputParseError):
        await service(scripted("query_duplicate", bad, bad)).query_duplicate(
            QueryDuplicateRequest(query="q", existing=["a"])
        )
