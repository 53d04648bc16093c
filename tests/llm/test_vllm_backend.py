"""VLLMBackend: import guard and output mapping here; a real run only where vLLM and CUDA are."""

import os
from types import SimpleNamespace

import pytest
from pydantic import BaseModel

from rubricate.llm.base import GenerationParams, Message, TokenLogprob
from rubricate.llm.errors import BackendRequestError
from rubricate.llm.structured import complete_structured
from rubricate.llm.usage import Usage
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


@pytest.mark.gpu
@pytest.mark.skipif(not (vllm_available() and _cuda()), reason="needs vLLM and a CUDA GPU")
async def test_vllm_structured_output() -> None:
    backend = VLLMBackend(
        model=os.environ.get("RUBRICATE_TEST_VLLM_MODEL", "Qwen/Qwen2.5-0.5B-Instruct"),
        gpu_memory_utilization=0.5,
        max_model_len=2048,
    )
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
