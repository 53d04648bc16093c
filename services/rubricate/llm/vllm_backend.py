"""VLLMBackend: vLLM's async engine in process, on a GPU (`pip install 'rubricate[gpu]'`).

Prompts are rendered with the model's own chat template and passed as token ids (no double
BOS); prefix caching is on by default, so a task's shared system prompt is computed once.
JSON schemas use vLLM's structured outputs: `StructuredOutputsParams(json=...)` as
`SamplingParams(structured_outputs=...)` (vLLM >= 0.10.2; the `guided_*` names were removed
in 0.12), or `GuidedDecodingParams(json=...)` as `SamplingParams(guided_decoding=...)` on
older releases. The module imports without vLLM; constructing the backend without it raises
`BackendRequestError`.
"""

import inspect
import logging
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from rubricate.llm.base import Completion, GenerationParams, LLMBackend, Message, TokenLogprob
from rubricate.llm.errors import BackendRequestError, TransportError
from rubricate.llm.openai_format import chat_messages
from rubricate.llm.prompt_text import neutralized_messages
from rubricate.llm.settings import LLMSettings

log = logging.getLogger("rubricate.llm.vllm")

INSTALL_HINT = "the vllm backend needs vLLM and a CUDA GPU: pip install 'rubricate[gpu]'"


def vllm_available() -> bool:
    try:
        import vllm  # noqa: F401
    except ImportError:
        return False
    return True


def _structured_outputs(schema: dict[str, Any]) -> dict[str, Any]:
    """The SamplingParams keyword constraining output to `schema`, for this vLLM version."""
    try:
        from vllm.sampling_params import StructuredOutputsParams
    except ImportError:
        from vllm.sampling_params import GuidedDecodingParams

        return {"guided_decoding": GuidedDecodingParams(json=schema)}
    return {"structured_outputs": StructuredOutputsParams(json=schema)}


def _token_ids(rendered: Any) -> list[int]:
    """`apply_chat_template(tokenize=True)` gives a list, or a BatchEncoding in transformers 5."""
    if isinstance(rendered, Mapping) or hasattr(rendered, "input_ids"):
        rendered = rendered["input_ids"]
    return [int(t) for t in rendered]


class VLLMBackend(LLMBackend):
    name = "vllm"

    def __init__(
        self,
        *,
        model: str,
        gpu_memory_utilization: float = 0.85,
        max_model_len: int | None = None,
        enable_prefix_caching: bool = True,
        tensor_parallel_size: int = 1,
    ) -> None:
        if not vllm_available():
            raise BackendRequestError(INSTALL_HINT)
        from vllm import AsyncEngineArgs, AsyncLLMEngine

        self.model = model
        args = AsyncEngineArgs(
            model=model,
            gpu_memory_utilization=gpu_memory_utilization,
            max_model_len=max_model_len,
            enable_prefix_caching=enable_prefix_caching,
            tensor_parallel_size=tensor_parallel_size,
        )
        started = time.perf_counter()
        self._engine: Any = AsyncLLMEngine.from_engine_args(args)
        self._tokenizer: Any = None
        log.info("vllm.loaded model=%s seconds=%.1f", model, time.perf_counter() - started)

    @classmethod
    def from_settings(cls, settings: LLMSettings) -> "VLLMBackend":
        if not settings.model:
            raise BackendRequestError("the vllm backend needs RUBRICATE_LLM_MODEL")
        return cls(
            model=settings.model,
            gpu_memory_utilization=settings.gpu_memory_utilization,
            max_model_len=settings.max_model_len,
            enable_prefix_caching=settings.enable_prefix_caching,
            tensor_parallel_size=settings.tensor_parallel_size,
        )

    async def _get_tokenizer(self) -> Any:
        if self._tokenizer is None:
            tokenizer = self._engine.get_tokenizer()  # a coroutine before vLLM 0.11
            self._tokenizer = await tokenizer if inspect.isawaitable(tokenizer) else tokenizer
        return self._tokenizer

    def _sampling_params(self, params: GenerationParams) -> Any:
        from vllm import SamplingParams

        kwargs: dict[str, Any] = {
            "temperature": params.temperature,
            "top_p": params.top_p,
            "max_tokens": params.max_tokens,
            "seed": params.seed,
            "stop": list(params.stop) or None,
            "logprobs": params.logprobs,
        }
        if params.json_schema is not None:
            kwargs.update(_structured_outputs(params.json_schema))
        try:
            from vllm.sampling_params import RequestOutputKind

            kwargs["output_kind"] = RequestOutputKind.FINAL_ONLY
        except ImportError:
            pass
        return SamplingParams(**kwargs)

    async def complete(self, messages: Sequence[Message], params: GenerationParams) -> Completion:
        tokenizer = await self._get_tokenizer()
        prompt_ids = _token_ids(
            tokenizer.apply_chat_template(
                # the tokenizer parses special tokens in the rendered text: defuse any that a
                # message's text spells (GitHub issue 17)
                chat_messages(neutralized_messages(messages)),
                tokenize=True,
                add_generation_prompt=True,
            )
        )
        sampling = self._sampling_params(params)
        started = time.perf_counter()
        final: Any = None
        try:
            async for output in self._engine.generate(
                {"prompt_token_ids": prompt_ids}, sampling, uuid.uuid4().hex
            ):
                final = output
        except (ValueError, TypeError) as exc:  # validation: prompt too long, bad params
            raise BackendRequestError(f"vLLM rejected the request: {exc}") from exc
        except Exception as exc:  # engine errors; a dead engine fails every retry
            raise TransportError(f"vLLM engine error: {type(exc).__name__}: {exc}") from exc
        latency = time.perf_counter() - started
        if final is None or not final.outputs:
            raise TransportError("vLLM returned no output")
        choice = final.outputs[0]
        return Completion(
            text=choice.text,
            prompt_tokens=len(prompt_ids),
            completion_tokens=len(choice.token_ids),
            latency_s=latency,
            model=self.model,
            backend=self.name,
            finish_reason=choice.finish_reason,
            logprobs=_logprobs(choice, params.logprobs),
        )

    async def ready(self) -> bool:
        try:
            await self._engine.check_health()
        except Exception:
            return False
        return True

    async def aclose(self) -> None:
        shutdown = getattr(self._engine, "shutdown", None)
        if callable(shutdown):
            shutdown()


def _logprobs(choice: Any, top_n: int | None) -> tuple[TokenLogprob, ...] | None:
    """vLLM gives, per position, {token_id: Logprob(logprob, rank, decoded_token)}."""
    if not top_n or choice.logprobs is None:
        return None
    out: list[TokenLogprob] = []
    for token_id, position in zip(choice.token_ids, choice.logprobs, strict=False):
        sampled = position[token_id]
        ranked = sorted(position.values(), key=lambda lp: lp.rank or 0)[:top_n]
        out.append(
            TokenLogprob(
                token=sampled.decoded_token or "",
                logprob=float(sampled.logprob),
                top={lp.decoded_token or "": float(lp.logprob) for lp in ranked},
            )
        )
    return tuple(out)
