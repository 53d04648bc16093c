import json
from collections.abc import Sequence

import pytest
from prometheus_client import REGISTRY
from pydantic import BaseModel, Field

from rubricate.common.usage import Usage
from rubricate.llm.base import GenerationParams, Message
from rubricate.llm.calls import complete_structured
from rubricate.llm.errors import BackendRequestError, OutputParseError, TransportError
from rubricate.llm.fake import FakeBackend
from rubricate.llm.structured import json_schema_for


class Item(BaseModel):
    index: int = Field(ge=1)
    score: int = Field(ge=0, le=2)


class Sheet(BaseModel):
    scores: list[Item]


GOOD = json.dumps({"scores": [{"index": 1, "score": 2}, {"index": 2, "score": 0}]})
MESSAGES = [Message("system", "grade"), Message("user", "two rubrics")]


class Sleeps:
    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)


def metric(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def two_items(sheet: Sheet) -> None:
    if len(sheet.scores) != 2:
        raise ValueError(f"expected exactly 2 items, got {len(sheet.scores)}")


async def run(
    backend: FakeBackend,
    usage: Usage,
    *,
    task: str,
    params: GenerationParams | None = None,
    sleeps: Sleeps | None = None,
    max_retries: int = 5,
    validate: bool = False,
) -> Sheet:
    return await complete_structured(
        backend,
        MESSAGES,
        output=Sheet,
        params=params or GenerationParams(max_tokens=100),
        usage=usage,
        task=task,
        validate=two_items if validate else None,
        max_retries=max_retries,
        backoff_base_s=0.5,
        backoff_max_s=2.0,
        sleep=sleeps or Sleeps(),
    )


async def test_valid_output_in_one_call_with_the_schema_sent() -> None:
    backend = FakeBackend([GOOD], prompt_tokens=30, completion_tokens=12, latency_s=0.25)
    usage = Usage()
    sheet = await run(backend, usage, task="t-ok")
    assert [i.score for i in sheet.scores] == [2, 0]
    assert usage == Usage(calls=1, prompt_tokens=30, completion_tokens=12, latency_s=0.25)
    ((sent, params),) = backend.calls
    assert list(sent) == MESSAGES
    assert params.json_schema == json_schema_for(Sheet) and params.max_tokens == 100


async def test_a_given_schema_is_kept() -> None:
    backend = FakeBackend([GOOD])
    custom = {"type": "object"}
    await run(backend, Usage(), task="t-keep", params=GenerationParams(json_schema=custom))
    assert backend.calls[0][1].json_schema == custom


async def test_invalid_output_gets_one_repair_call_quoting_the_error() -> None:
    bad = '{"scores": [{"index": 1, "score": 5}]}'
    backend = FakeBackend([bad, f"```json\n{GOOD}\n```"])
    usage = Usage()
    before = metric("rubricate_llm_retries_total", task="t-repair", reason="repair")
    sheet = await run(backend, usage, task="t-repair")
    assert len(sheet.scores) == 2
    assert usage.calls == 2 and usage.prompt_tokens == 20
    assert metric("rubricate_llm_retries_total", task="t-repair", reason="repair") == before + 1
    repair_messages = backend.calls[1][0]
    assert list(repair_messages[:2]) == MESSAGES
    assert repair_messages[2] == Message("assistant", bad)
    assert repair_messages[3].role == "user"
    assert "scores.0.score: Input should be less than or equal to 2 (got 5)" in (
        repair_messages[3].content
    )
    assert "only the corrected JSON" in repair_messages[3].content


async def test_still_invalid_after_repair_raises_with_raw_text_and_usage_of_both_calls() -> None:
    backend = FakeBackend(["no idea", "still no JSON here"], prompt_tokens=40, completion_tokens=9)
    usage = Usage()
    before = metric("rubricate_llm_parse_failures_total", task="t-fail")
    with pytest.raises(OutputParseError) as caught:
        await run(backend, usage, task="t-fail")
    assert caught.value.raw == "still no JSON here"
    assert "t-fail" in str(caught.value) and "no JSON object or array found" in str(caught.value)
    assert caught.value.usage == Usage(calls=2, prompt_tokens=80, completion_tokens=18)
    assert usage.calls == 2
    assert metric("rubricate_llm_parse_failures_total", task="t-fail") == before + 1
    assert len(backend.calls) == 2


async def test_the_validate_hook_counts_as_invalid_output() -> None:
    one = json.dumps({"scores": [{"index": 1, "score": 1}]})
    backend = FakeBackend([one, GOOD])
    usage = Usage()
    sheet = await run(backend, usage, task="t-hook", validate=True)
    assert len(sheet.scores) == 2 and usage.calls == 2
    assert "expected exactly 2 items, got 1" in backend.calls[1][0][-1].content


async def test_the_validate_hook_failing_twice_raises() -> None:
    one = json.dumps({"scores": [{"index": 1, "score": 1}]})
    with pytest.raises(OutputParseError, match="expected exactly 2 items"):
        await run(FakeBackend([one, one]), Usage(), task="t-hook2", validate=True)


async def test_cut_off_output_is_reported_as_such_in_the_repair_prompt() -> None:
    backend = FakeBackend(['{"scores": [{"index": 1,', GOOD], finish_reason="length")
    await run(backend, Usage(), task="t-length")
    repair = backend.calls[1][0][-1].content
    assert "cut off" in repair and "100-token limit" in repair


async def test_transport_errors_are_retried_around_each_call() -> None:
    backend = FakeBackend([TransportError("503"), TransportError("reset"), GOOD])
    sleeps = Sleeps()
    usage = Usage()
    before = metric("rubricate_llm_retries_total", task="t-transport", reason="transport")
    await run(backend, usage, task="t-transport", sleeps=sleeps)
    assert len(sleeps.delays) == 2 and all(0 <= d <= 1.0 for d in sleeps.delays)
    assert usage.calls == 1 and len(backend.calls) == 3
    assert metric("rubricate_llm_retries_total", task="t-transport", reason="transport") == (
        before + 2
    )


async def test_transport_errors_after_retries_carry_the_task_usage() -> None:
    backend = FakeBackend(["garbage", TransportError("down"), TransportError("still down")])
    usage = Usage()
    with pytest.raises(TransportError, match="still down") as caught:
        await run(backend, usage, task="t-down", max_retries=1)
    assert caught.value.usage == Usage(calls=1, prompt_tokens=10, completion_tokens=5)
    assert caught.value.usage is not usage and usage.calls == 1


async def test_rejected_requests_are_not_retried() -> None:
    backend = FakeBackend([BackendRequestError("prompt too long")])
    sleeps = Sleeps()
    with pytest.raises(BackendRequestError) as caught:
        await run(backend, Usage(), task="t-reject", sleeps=sleeps)
    assert len(backend.calls) == 1 and sleeps.delays == []
    assert caught.value.usage == Usage()


async def test_a_scripted_function_sees_the_conversation() -> None:
    def script(messages: Sequence[Message], params: GenerationParams) -> str:
        return GOOD if messages[-1].role == "user" and len(messages) > 2 else "nope"

    backend = FakeBackend(script)
    assert len((await run(backend, Usage(), task="t-fn")).scores) == 2
    assert len(backend.calls) == 2
