"""EmbeddedBackend on the real SmolLM2-135M GGUF (loads in well under a second)."""

import asyncio
import json
import logging
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, Field

from rubricate.common.usage import Usage
from rubricate.llm.base import GenerationParams, Message
from rubricate.llm.calls import complete_structured
from rubricate.llm.errors import BackendRequestError, ModelFileError
from rubricate.llm.settings import LLMSettings
from rubricate.llm.structured import json_schema_for

from .conftest import LLAMA_CPP_ERROR

pytestmark = pytest.mark.skipif(LLAMA_CPP_ERROR is not None, reason=LLAMA_CPP_ERROR or "")

if LLAMA_CPP_ERROR is None:
    from rubricate.llm.embedded import EmbeddedBackend, enumerate_small_int_ranges


class Verdict(BaseModel):
    label: str
    score: int
    reasons: list[str] = Field(min_length=2, max_length=2)


PROMPT = [
    Message("system", "You are a strict grader. Answer with JSON only."),
    Message("user", "Grade the answer '2+2=4' with a label, a score and two reasons."),
]


@pytest.fixture(scope="module")
def smol(smollm2_path: Path) -> Iterator["EmbeddedBackend"]:
    backend = EmbeddedBackend(model_path=smollm2_path, model_name="smollm2-135m", n_ctx=2048)
    yield backend
    asyncio.run(backend.aclose())


async def test_schema_constrained_json(smol: "EmbeddedBackend") -> None:
    params = GenerationParams(max_tokens=200, json_schema=json_schema_for(Verdict))
    completion = await smol.complete(PROMPT, params)
    verdict = Verdict.model_validate(json.loads(completion.text))  # the grammar guarantees it
    assert len(verdict.reasons) == 2
    assert completion.prompt_tokens > 20 and completion.completion_tokens > 5
    assert completion.latency_s > 0 and completion.finish_reason == "stop"
    assert (completion.model, completion.backend) == ("smollm2-135m", "embedded")


async def test_complete_structured_end_to_end(smol: "EmbeddedBackend") -> None:
    usage = Usage()
    verdict = await complete_structured(
        smol,
        PROMPT,
        output=Verdict,
        params=GenerationParams(max_tokens=200),
        usage=usage,
        task="test-embedded",
    )
    assert len(verdict.reasons) == 2 and usage.calls == 1 and usage.completion_tokens > 5


async def test_temperature_zero_is_deterministic_and_max_tokens_is_honoured(
    smol: "EmbeddedBackend",
) -> None:
    params = GenerationParams(max_tokens=6)
    first = await smol.complete([Message("user", "Tell me a long story.")], params)
    second = await smol.complete([Message("user", "Tell me a long story.")], params)
    assert first.text == second.text
    assert first.completion_tokens == 6 and first.finish_reason == "length"


async def test_stop_sequences(smol: "EmbeddedBackend") -> None:
    params = GenerationParams(max_tokens=40, stop=(",",))
    completion = await smol.complete([Message("user", "List: apples, pears, plums")], params)
    assert "," not in completion.text


async def test_concurrent_calls_are_serialised_and_all_answered(smol: "EmbeddedBackend") -> None:
    params = GenerationParams(max_tokens=8)
    prompts = [[Message("user", f"Number {i}?")] for i in range(3)]
    results = await asyncio.gather(*(smol.complete(p, params) for p in prompts))
    assert all(r.completion_tokens > 0 for r in results)
    again = await smol.complete(prompts[0], params)
    assert again.text == results[0].text


async def test_a_cancelled_call_does_not_break_the_next(smol: "EmbeddedBackend") -> None:
    slow = asyncio.create_task(
        smol.complete([Message("user", "Write a long essay.")], GenerationParams(max_tokens=60))
    )
    await asyncio.sleep(0.05)
    slow.cancel()
    with pytest.raises(asyncio.CancelledError):
        await slow
    completion = await smol.complete([Message("user", "Hi")], GenerationParams(max_tokens=4))
    assert completion.completion_tokens > 0


async def test_a_prompt_over_the_context_is_rejected(smol: "EmbeddedBackend") -> None:
    with pytest.raises(BackendRequestError, match="exceed context window"):
        await smol.complete([Message("user", "word " * 3000)], GenerationParams(max_tokens=8))


async def test_logprobs_need_the_setting(smol: "EmbeddedBackend") -> None:
    with pytest.raises(BackendRequestError, match="RUBRICATE_LLM_EMBEDDED_LOGPROBS"):
        await smol.complete([Message("user", "Hi")], GenerationParams(logprobs=2))


async def test_logprobs(smollm2_path: Path) -> None:
    backend = EmbeddedBackend(model_path=smollm2_path, n_ctx=512, logprobs=True)
    try:
        completion = await backend.complete(
            [Message("user", "Count: one, two,")], GenerationParams(max_tokens=4, logprobs=3)
        )
    finally:
        await backend.aclose()
    assert completion.logprobs is not None
    assert len(completion.logprobs) == completion.completion_tokens == 4
    assert "".join(t.token for t in completion.logprobs) == completion.text
    for token in completion.logprobs:
        assert token.logprob <= 0 and 1 <= len(token.top) <= 4
        assert max(token.top.values()) >= token.logprob
    assert backend.model == smollm2_path.stem


async def test_an_unsupported_schema_still_yields_json(
    smol: "EmbeddedBackend", caplog: pytest.LogCaptureFixture
) -> None:
    schema = {
        "type": "object",
        "properties": {"code": {"type": "string", "pattern": "[a-z]+"}},  # no ^…$: unsupported
        "required": ["code"],
    }
    with caplog.at_level(logging.WARNING, logger="rubricate.llm.embedded"):
        completion = await smol.complete(
            [Message("user", "Give a JSON object with a code.")],
            GenerationParams(max_tokens=60, json_schema=schema),
        )
    assert completion.text.lstrip().startswith("{")  # any-JSON grammar (may run to max_tokens)
    assert "embedded.schema_unsupported" in caplog.text


async def test_from_settings_and_close(smollm2_path: Path) -> None:
    backend = EmbeddedBackend.from_settings(LLMSettings(embedded_model="smollm2-135m", n_ctx=512))
    assert backend.model == "smollm2-135m" and backend.model_path == smollm2_path
    assert await backend.ready() is True
    await backend.aclose()
    assert await backend.ready() is False
    with pytest.raises(BackendRequestError, match="closed"):
        await backend.complete([Message("user", "Hi")], GenerationParams(max_tokens=2))


def test_a_file_that_is_no_model_is_a_model_file_error(tmp_path: Path) -> None:
    bogus = tmp_path / "bogus.gguf"
    bogus.write_bytes(b"not a gguf file at all")
    with pytest.raises(ModelFileError, match="could not load"):
        EmbeddedBackend(model_path=bogus, n_ctx=512)


def test_small_integer_ranges_are_enumerated_for_the_grammar() -> None:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "score": {"type": "integer", "minimum": 0, "maximum": 2},
            "rank": {"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 4},
            "index": {"type": "integer", "minimum": 1},
            "big": {"type": "integer", "minimum": 0, "maximum": 1000},
            "ratio": {"type": "number", "minimum": 0, "maximum": 1},
            "items": {"type": "array", "items": {"type": "integer", "minimum": 1, "maximum": 3}},
        },
    }
    out = enumerate_small_int_ranges(schema)["properties"]
    assert out["score"]["enum"] == [0, 1, 2]
    assert out["rank"]["enum"] == [1, 2, 3]
    assert out["items"]["items"]["enum"] == [1, 2, 3]
    assert all("enum" not in out[k] for k in ("index", "big", "ratio"))
    assert "enum" not in schema["properties"]["score"]  # the input is left alone


async def test_bounded_integers_are_enforced(smol: "EmbeddedBackend") -> None:
    schema = {
        "type": "object",
        "properties": {"score": {"type": "integer", "minimum": 7, "maximum": 9}},
        "required": ["score"],
    }
    completion = await smol.complete(
        [Message("user", "Give a score of 1000000 as JSON.")],
        GenerationParams(max_tokens=20, json_schema=schema),
    )
    assert json.loads(completion.text)["score"] in (7, 8, 9)


SCORING = [
    Message("system", "You label facts. Reply with a JSON array of labels."),
    Message("user", "Passage: Paris is the capital of France.\nFact: Paris is in France."),
]
CHOICES = ("support", "partial_support", "not_support")


async def test_choice_scores_are_log_probabilities_equal_to_a_fresh_context(
    smol: "EmbeddedBackend", smollm2_path: Path
) -> None:
    # warm smol's KV cache with a prompt sharing the system message, so scoring reuses it
    await smol.complete([*SCORING[:1], Message("user", "Hi")], GenerationParams(max_tokens=2))
    warm = await smol.score_choices(SCORING, reply_prefix='["', choices=CHOICES)
    fresh_backend = EmbeddedBackend(model_path=smollm2_path, n_ctx=2048)
    try:
        fresh = await fresh_backend.score_choices(SCORING, reply_prefix='["', choices=CHOICES)
    finally:
        await fresh_backend.aclose()
    assert set(warm.logprobs) == set(CHOICES)
    for choice in CHOICES:
        assert warm.logprobs[choice] <= 0.0
        assert warm.logprobs[choice] == pytest.approx(fresh.logprobs[choice], abs=1e-3)
    assert sum(math.exp(v) for v in warm.logprobs.values()) <= 1.0 + 1e-6
    assert warm.prompt_tokens == fresh.prompt_tokens > 20
    assert (warm.model, warm.backend) == ("smollm2-135m", "embedded")


async def test_generation_after_scoring_is_unchanged(
    smol: "EmbeddedBackend", smollm2_path: Path
) -> None:
    params = GenerationParams(max_tokens=12)
    await smol.score_choices(SCORING, reply_prefix='["', choices=CHOICES)
    after = await smol.complete(SCORING, params)
    fresh_backend = EmbeddedBackend(model_path=smollm2_path, n_ctx=2048)
    try:
        fresh = await fresh_backend.complete(SCORING, params)
    finally:
        await fresh_backend.aclose()
    assert after.text == fresh.text


async def test_choice_scoring_errors(smol: "EmbeddedBackend", smollm2_path: Path) -> None:
    with pytest.raises(BackendRequestError, match="share a first token"):
        await smol.score_choices(SCORING, reply_prefix='["', choices=("support", "support!"))
    with pytest.raises(BackendRequestError, match="exceeds the context window"):
        await smol.score_choices(
            [Message("user", "word " * 3000)], reply_prefix='["', choices=CHOICES
        )
    closed = EmbeddedBackend(model_path=smollm2_path, n_ctx=512)
    await closed.aclose()
    with pytest.raises(BackendRequestError, match="closed"):
        await closed.score_choices(SCORING, reply_prefix='["', choices=CHOICES)
    # the backend still works after the errors
    ok = await smol.score_choices(SCORING, reply_prefix='["', choices=CHOICES)
    assert set(ok.logprobs) == set(CHOICES)
