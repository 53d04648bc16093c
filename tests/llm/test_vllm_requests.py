"""What VLLMBackend asks of vLLM: engine arguments (prefix caching, GPU memory) and sampling
parameters (structured outputs for guided JSON), checked against a fake `vllm` package.

vLLM cannot be installed on a CPU-only machine: `FakeVLLM` stands in for the few names the
backend imports (AsyncEngineArgs, AsyncLLMEngine, SamplingParams, StructuredOutputsParams or
the older GuidedDecodingParams, RequestOutputKind) and records what it was given. The real
engine runs only in tests/llm/test_vllm_backend.py (marker `gpu`).
"""

import sys
import types
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pytest
from pydantic import BaseModel

from rubricate.common.usage import Usage
from rubricate.llm.base import GenerationParams, Message
from rubricate.llm.calls import complete_structured
from rubricate.llm.errors import BackendRequestError, TransportError
from rubricate.llm.settings import LLMSettings
from rubricate.llm.vllm_backend import VLLMBackend


class FakeKwargs:
    """A vLLM parameter object reduced to the keyword arguments it was built with."""

    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.kwargs == self.kwargs  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return id(self)


class FakeAsyncEngineArgs(FakeKwargs):
    pass


class FakeSamplingParams(FakeKwargs):
    pass


class FakeStructuredOutputsParams(FakeKwargs):
    pass


class FakeGuidedDecodingParams(FakeKwargs):
    pass


class FakeRequestOutputKind:
    FINAL_ONLY = "final_only"


class FakeTokenizer:
    """Renders a chat as one token per character of `role:content|...`, generation prompt last."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def apply_chat_template(
        self, messages: list[dict[str, str]], *, tokenize: bool, add_generation_prompt: bool
    ) -> dict[str, list[int]]:
        self.calls.append(
            {"messages": messages, "tokenize": tokenize, "gen": add_generation_prompt}
        )
        text = "|".join(f"{m['role']}:{m['content']}" for m in messages)
        text += "|assistant:" if add_generation_prompt else ""
        return {"input_ids": [ord(c) for c in text]}


@dataclass
class FakeEngine:
    """AsyncLLMEngine stand-in: answers every request with the next queued reply."""

    args: FakeAsyncEngineArgs
    replies: list[str] = field(default_factory=list)
    requests: list[tuple[dict[str, Any], FakeSamplingParams, str]] = field(default_factory=list)
    tokenizer: FakeTokenizer = field(default_factory=FakeTokenizer)
    error: Exception | None = None
    shut_down: bool = False

    async def get_tokenizer(self) -> FakeTokenizer:  # a coroutine, as before vLLM 0.11
        return self.tokenizer

    async def generate(
        self, prompt: dict[str, Any], sampling: FakeSamplingParams, request_id: str
    ) -> AsyncIterator[Any]:
        self.requests.append((prompt, sampling, request_id))
        if self.error is not None:
            raise self.error
        text = self.replies.pop(0)
        choice = types.SimpleNamespace(
            text=text, token_ids=list(range(len(text.split()))), finish_reason="stop", logprobs=None
        )
        yield types.SimpleNamespace(outputs=[choice])

    async def check_health(self) -> None:
        return None

    def shutdown(self) -> None:
        self.shut_down = True


class FakeAsyncLLMEngine:
    created: ClassVar[list[FakeEngine]] = []

    @classmethod
    def from_engine_args(cls, args: FakeAsyncEngineArgs) -> FakeEngine:
        engine = FakeEngine(args=args)
        cls.created.append(engine)
        return engine


def _fake_vllm(*, structured_outputs: bool) -> dict[str, types.ModuleType]:
    vllm = types.ModuleType("vllm")
    vllm.AsyncEngineArgs = FakeAsyncEngineArgs  # type: ignore[attr-defined]
    vllm.AsyncLLMEngine = FakeAsyncLLMEngine  # type: ignore[attr-defined]
    vllm.SamplingParams = FakeSamplingParams  # type: ignore[attr-defined]
    sampling = types.ModuleType("vllm.sampling_params")
    sampling.RequestOutputKind = FakeRequestOutputKind  # type: ignore[attr-defined]
    if structured_outputs:  # vLLM >= 0.10.2
        sampling.StructuredOutputsParams = FakeStructuredOutputsParams  # type: ignore[attr-defined]
    else:
        sampling.GuidedDecodingParams = FakeGuidedDecodingParams  # type: ignore[attr-defined]
    vllm.sampling_params = sampling  # type: ignore[attr-defined]
    return {"vllm": vllm, "vllm.sampling_params": sampling}


@pytest.fixture
def fake_vllm(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """FakeVLLM as the `vllm` package (current API, structured outputs)."""
    for name, module in _fake_vllm(structured_outputs=True).items():
        monkeypatch.setitem(sys.modules, name, module)
    FakeAsyncLLMEngine.created = []
    yield


class Verdict(BaseModel):
    score: int
    reason: str


SCHEMA = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}


def _engine() -> FakeEngine:
    (engine,) = FakeAsyncLLMEngine.created
    return engine


def test_engine_args_turn_prefix_caching_on_with_the_configured_gpu_memory(
    fake_vllm: None,
) -> None:
    settings = LLMSettings(
        backend="vllm",
        model="Qwen/Qwen2.5-7B-Instruct",
        gpu_memory_utilization=0.9,
        max_model_len=16384,
        tensor_parallel_size=2,
    )
    backend = VLLMBackend.from_settings(settings)
    assert _engine().args == FakeAsyncEngineArgs(
        model="Qwen/Qwen2.5-7B-Instruct",
        gpu_memory_utilization=0.9,
        max_model_len=16384,
        enable_prefix_caching=True,
        tensor_parallel_size=2,
    )
    assert backend.name == "vllm" and backend.model == "Qwen/Qwen2.5-7B-Instruct"


def test_prefix_caching_can_be_turned_off(fake_vllm: None) -> None:
    VLLMBackend(model="m", enable_prefix_caching=False)
    assert _engine().args.kwargs["enable_prefix_caching"] is False


async def test_json_schema_becomes_structured_outputs(fake_vllm: None) -> None:
    backend = VLLMBackend(model="m")
    _engine().replies.append('{"x": 1}')
    params = GenerationParams(
        temperature=0.2, max_tokens=64, top_p=0.9, seed=7, json_schema=SCHEMA, stop=("END",)
    )
    completion = await backend.complete(
        [Message("system", "judge"), Message("user", "rate it")], params
    )
    (prompt, sampling, request_id) = _engine().requests[0]
    assert sampling == FakeSamplingParams(
        temperature=0.2,
        top_p=0.9,
        max_tokens=64,
        seed=7,
        stop=["END"],
        logprobs=None,
        structured_outputs=FakeStructuredOutputsParams(json=SCHEMA),
        output_kind=FakeRequestOutputKind.FINAL_ONLY,
    )
    # the model's chat template, tokenized once, with the generation prompt; ids, not text
    (call,) = _engine().tokenizer.calls
    assert call["gen"] is True and call["tokenize"] is True
    assert [m["role"] for m in call["messages"]] == ["system", "user"]
    expected_ids = [ord(c) for c in "system:judge|user:rate it|assistant:"]
    assert prompt == {"prompt_token_ids": expected_ids}
    assert len(request_id) == 32
    assert completion.text == '{"x": 1}'
    assert completion.prompt_tokens == len(expected_ids)
    assert completion.backend == "vllm" and completion.finish_reason == "stop"


async def test_without_a_schema_no_guided_decoding(fake_vllm: None) -> None:
    backend = VLLMBackend(model="m")
    _engine().replies.append("free text")
    await backend.complete([Message("user", "hi")], GenerationParams())
    (_, sampling, _) = _engine().requests[0]
    assert "structured_outputs" not in sampling.kwargs
    assert "guided_decoding" not in sampling.kwargs


async def test_older_vllm_gets_guided_decoding_params(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, module in _fake_vllm(structured_outputs=False).items():
        monkeypatch.setitem(sys.modules, name, module)
    FakeAsyncLLMEngine.created = []
    backend = VLLMBackend(model="m")
    _engine().replies.append('{"x": 2}')
    await backend.complete([Message("user", "hi")], GenerationParams(json_schema=SCHEMA))
    (_, sampling, _) = _engine().requests[0]
    assert sampling.kwargs["guided_decoding"] == FakeGuidedDecodingParams(json=SCHEMA)
    assert "structured_outputs" not in sampling.kwargs


async def test_complete_structured_sends_the_pydantic_schema_and_parses(
    fake_vllm: None,
) -> None:
    backend = VLLMBackend(model="m")
    _engine().replies.append('{"score": 2, "reason": "names the unit mismatch"}')
    usage = Usage()
    verdict = await complete_structured(
        backend,
        [Message("user", "Judge this.")],
        output=Verdict,
        params=GenerationParams(max_tokens=100),
        usage=usage,
        task="stage_scoring",
    )
    assert verdict == Verdict(score=2, reason="names the unit mismatch")
    (_, sampling, _) = _engine().requests[0]
    schema = sampling.kwargs["structured_outputs"].kwargs["json"]
    assert schema["type"] == "object" and set(schema["required"]) == {"score", "reason"}
    assert usage.calls == 1 and usage.prompt_tokens > 0


async def test_engine_failures_map_onto_the_retry_policy(fake_vllm: None) -> None:
    backend = VLLMBackend(model="m")
    _engine().error = ValueError("prompt is longer than max_model_len")
    with pytest.raises(BackendRequestError, match="max_model_len"):
        await backend.complete([Message("user", "x")], GenerationParams())
    _engine().error = RuntimeError("engine dead")
    with pytest.raises(TransportError, match="engine dead"):
        await backend.complete([Message("user", "x")], GenerationParams())
    assert await backend.ready()
    await backend.aclose()
    assert _engine().shut_down
