"""VLLMBackend: import guard and output mapping here; a real run only where vLLM and CUDA are."""

import asyncio
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from pydantic import BaseModel

from rubricate.common.usage import Usage
from rubricate.llm.base import GenerationParams, Message, TokenLogprob
from rubricate.llm.calls import complete_structured
from rubricate.llm.errors import BackendRequestError
from rubricate.llm.openai_compat import OpenAICompatBackend
from rubricate.llm.vllm_backend import VLLMBackend, _logprobs, _token_ids, vllm_available


def _cuda() -> bool:
    try:
        import torch  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


@pytest.mark.skipif(vllm_available(), reason="vLLM is installed here")
def test_without_vllm_construction_says_what_to_install() -> None:
    with pytest.raises(BackendRequestError, match=r"pip install 'rubricate\[gpu\]'"):
        VLLMBackend(model="Qwen/Qwen2.5-0.5B-Instruct")


def test_chat_template_token_ids_from_list_or_batch_encoding() -> None:
    assert _token_ids([1, 2, 3]) == [1, 2, 3]
    assert _token_ids({"input_ids": [4, 5], "attention_mask": [1, 1]}) == [4, 5]


def test_logprobs_mapping() -> None:
    def lp(value: float, rank: int, text: str) -> SimpleNamespace:
        return SimpleNamespace(logprob=value, rank=rank, decoded_token=text)

    choice = SimpleNamespace(
        token_ids=[10, 11],
        logprobs=[
            {10: lp(-0.5, 2, "a"), 12: lp(-0.2, 1, "b"), 13: lp(-3.0, 3, "c")},
            {11: lp(-0.1, 1, "d")},
        ],
    )
    assert _logprobs(choice, 2) == (
        TokenLogprob("a", -0.5, {"b": -0.2, "a": -0.5}),
        TokenLogprob("d", -0.1, {"d": -0.1}),
    )
    assert _logprobs(choice, None) is None


class Answer(BaseModel):
    city: str


# The real engine: only where vLLM and a CUDA GPU are. The model is a Hugging Face id or a
# local directory (machines without internet: RUBRICATE_TEST_VLLM_MODEL=/path/to/model).
TEST_MODEL = os.environ.get("RUBRICATE_TEST_VLLM_MODEL", "Qwen/Qwen2.5-0.5B-Instruct")


def _vllm_gpu_missing() -> str | None:
    """Why the real-engine tests cannot run here, or None."""
    if not vllm_available():
        return "vLLM is not installed (pip install 'rubricate[gpu]' on a CUDA machine)"
    if not _cuda():
        return "vLLM is installed but torch sees no CUDA GPU"
    return None


VLLM_GPU_MISSING = _vllm_gpu_missing()
needs_vllm_gpu = pytest.mark.skipif(VLLM_GPU_MISSING is not None, reason=VLLM_GPU_MISSING or "")


@pytest.mark.gpu
@needs_vllm_gpu
async def test_vllm_structured_output() -> None:
    backend = VLLMBackend(model=TEST_MODEL, gpu_memory_utilization=0.5, max_model_len=2048)
    try:
        assert await backend.ready()
        usage = Usage()
        answer = await complete_structured(
            backend,
            [Message("user", "Which city is the capital of France? JSON only.")],
            output=Answer,
            params=GenerationParams(max_tokens=40),
            usage=usage,
            task="test-vllm",
        )
        assert answer.city and usage.calls == 1 and usage.prompt_tokens > 0
    finally:
        await backend.aclose()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture
def vllm_serve() -> Iterator[tuple[int, subprocess.Popen[bytes]]]:
    """`vllm serve` as docker-compose runs it: prefix caching, xgrammar structured outputs."""
    port = _free_port()
    server = subprocess.Popen(
        [
            shutil.which("vllm", path=str(Path(sys.executable).parent)) or "vllm",
            "serve", TEST_MODEL,
            "--host=127.0.0.1", f"--port={port}", "--max-model-len=2048",
            "--gpu-memory-utilization=0.5", "--enable-prefix-caching",
            "--structured-outputs-config.backend=xgrammar",
        ],
    )  # fmt: skip
    try:
        yield port, server
    finally:
        server.terminate()
        server.wait(timeout=60)


@pytest.mark.gpu
@needs_vllm_gpu
async def test_vllm_serve_openai_server_with_guided_json(
    vllm_serve: tuple[int, "subprocess.Popen[bytes]"],
) -> None:
    """The openai backend against `vllm serve` with a JSON schema (response_format
    json_schema, which vLLM enforces by guided decoding)."""
    port, server = vllm_serve
    backend = OpenAICompatBackend(base_url=f"http://127.0.0.1:{port}/v1", model=TEST_MODEL)
    try:
        deadline = time.monotonic() + 900
        while not await backend.ready():
            assert server.poll() is None, f"vllm serve exited with {server.returncode}"
            assert time.monotonic() < deadline, "vllm serve did not come up in 15 minutes"
            await asyncio.sleep(5)
        usage = Usage()
        answer = await complete_structured(
            backend,
            [Message("user", "Which city is the capital of France? JSON only.")],
            output=Answer,
            params=GenerationParams(max_tokens=40),
            usage=usage,
            task="test-vllm-serve",
        )
        # the server took the json_schema response format (no fallback to json_object)
        assert answer.city and usage.calls == 1 and backend.schema_mode == "auto"
    finally:
        await backend.aclose()
