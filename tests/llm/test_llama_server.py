"""OpenAICompatBackend against a real llama.cpp OpenAI-compatible server (SmolLM2-135M)."""

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from pydantic import BaseModel, Field

from rubricate.llm.base import GenerationParams, Message
from rubricate.llm.errors import BackendRequestError, TransportError
from rubricate.llm.openai_compat import OpenAICompatBackend
from rubricate.llm.settings import LLMSettings
from rubricate.llm.structured import complete_structured
from rubricate.llm.usage import Usage

from .conftest import LLAMA_CPP_ERROR

pytestmark = pytest.mark.skipif(LLAMA_CPP_ERROR is not None, reason=LLAMA_CPP_ERROR or "")

N_CTX = 2048
STARTUP_TIMEOUT_S = 90.0


class Person(BaseModel):
    name: str
    age: int
    hobbies: list[str] = Field(min_length=1, max_length=3)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


@pytest.fixture(scope="module")
def llama_server(smollm2_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`python -m llama_cpp.server` on loopback; yields its base URL (…/v1)."""
    port = _free_port()
    log_path = tmp_path_factory.mktemp("llama-server") / "server.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "llama_cpp.server",
                "--model",
                str(smollm2_path),
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--n_ctx",
                str(N_CTX),
                "--n_threads",
                "2",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while True:
            if process.poll() is not None:
                tail = log_path.read_text()[-3000:]
                pytest.fail(f"llama.cpp server exited ({process.returncode}):\n{tail}")
            try:
                if httpx.get(f"{base_url}/models", timeout=1.0).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                tail = log_path.read_text()[-3000:]
                pytest.fail(f"llama.cpp server not ready in {STARTUP_TIMEOUT_S}s:\n{tail}")
            time.sleep(0.2)
        yield base_url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


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
