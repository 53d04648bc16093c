"""OpenAICompatBackend against a real llama.cpp OpenAI-compatible server (SmolLM2-135M)."""

import pytest
from pydantic import BaseModel, Field

from rubricate.common.usage import Usage
from rubricate.llm.base import GenerationParams, Message
from rubricate.llm.calls import complete_structured
from rubricate.llm.errors import BackendRequestError, TransportError
from rubricate.llm.openai_compat import OpenAICompatBackend
from rubricate.llm.settings import LLMSettings

from .conftest import LLAMA_CPP_ERROR

pytestmark = pytest.mark.skipif(LLAMA_CPP_ERROR is not None, reason=LLAMA_CPP_ERROR or "")


class Person(BaseModel):
    name: str
    age: int
    hobbies: list[str] = Field(min_length=1, max_length=3)


def backend_for(base_url: str, **overrides: object) -> OpenAICompatBackend:
    settings = LLMSettings.model_validate(
        {"backend": "openai", "base_url": base_url, "timeout_s": 60} | overrides
    )
    return OpenAICompatBackend.from_settings(settings)


async def test_ready(llama_server: str) -> None:
    backend = backend_for(llama_server)
    assert await backend.ready() is True
    await backend.aclose()


async def test_plain_completion(llama_server: str) -> None:
    backend = backend_for(llama_server)
    completion = await backend.complete(
        [Message("user", "Say hello in one word.")], GenerationParams(max_tokens=16)
    )
    assert completion.text.strip()
    assert completion.prompt_tokens > 5 and 0 < completion.completion_tokens <= 16
    assert completion.finish_reason in ("stop", "length")
    assert completion.model.endswith(".gguf")  # discovered from /v1/models
    await backend.aclose()


async def test_schema_constrained_completion_parses(llama_server: str) -> None:
    backend = backend_for(llama_server)
    usage = Usage()
    person = await complete_structured(
        backend,
        [Message("user", "Describe a fictional person as JSON with name, age and hobbies.")],
        output=Person,
        params=GenerationParams(max_tokens=120, schema_name="person"),
        usage=usage,
        task="test-llama-server",
        max_retries=0,
    )
    assert person.name and 1 <= len(person.hobbies) <= 3
    assert usage.calls >= 1 and usage.prompt_tokens > 0 and usage.completion_tokens > 0
    assert backend.schema_mode == "json_object"  # llama.cpp refused json_schema; fell back
    await backend.aclose()


async def test_logprobs(llama_server: str) -> None:
    backend = backend_for(llama_server)
    completion = await backend.complete(
        [Message("user", "Count: one, two,")], GenerationParams(max_tokens=4, logprobs=2)
    )
    assert (
        completion.logprobs is not None and len(completion.logprobs) == completion.completion_tokens
    )
    assert all(t.logprob <= 0 and t.top for t in completion.logprobs)
    await backend.aclose()


async def test_server_5xx_is_a_transport_error(llama_server: str) -> None:
    # llama.cpp's server answers an unknown response_format type with HTTP 500
    backend = backend_for(llama_server, openai_schema_mode="json_schema")
    with pytest.raises(TransportError, match="HTTP 500"):
        await backend.complete(
            [Message("user", "hi")], GenerationParams(max_tokens=8, json_schema={"type": "object"})
        )
    await backend.aclose()


async def test_prompt_over_the_context_is_rejected(llama_server: str) -> None:
    backend = backend_for(llama_server)
    with pytest.raises(BackendRequestError, match=r"HTTP 400.*context"):
        await backend.complete([Message("user", "word " * 3000)], GenerationParams(max_tokens=8))
    await backend.aclose()
