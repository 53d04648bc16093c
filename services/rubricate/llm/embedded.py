"""EmbeddedBackend: a GGUF model on CPU through llama.cpp (llama-cpp-python), in process.

One `Llama` instance is loaded at construction and shared by every call; calls run one at a
time in a worker thread (a llama.cpp context is not thread-safe), so consecutive prompts that
share a prefix (the task's system prompt, a repair call's conversation) reuse the KV cache.
`prompt_cache_mb` adds a `LlamaRAMCache` for prefixes across alternating prompts; it is off
by default: saving and restoring a state costs about a second per call on CPU, about what it
saves on a judge system prompt.

A JSON schema becomes a llama.cpp grammar (the same conversion `response_format=
{"type": "json_object", "schema": ...}` does), compiled once per schema; unlike
`response_format`, a schema the converter cannot handle is logged instead of silently
replaced by free JSON. The converter ignores numeric bounds, so small bounded integer
ranges (a 0..2 score) are enumerated first. Sampling follows OpenAI semantics (no repeat
penalty, top-k or min-p), so the embedded and served backends decode alike.
"""

import asyncio
import json
import logging
import math
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from rubricate.llm.base import Completion, GenerationParams, LLMBackend, Message
from rubricate.llm.errors import BackendRequestError, ModelFileError
from rubricate.llm.openai_format import chat_messages, completion_from_response
from rubricate.llm.settings import LLMSettings

if TYPE_CHECKING:
    from llama_cpp.llama_grammar import LlamaGrammar

log = logging.getLogger("rubricate.llm.embedded")


_TOP_K = 40


class EmbeddedBackend(LLMBackend):
    name = "embedded"

    def __init__(
        self,
        *,
        model_path: Path,
        model_name: str | None = None,
        n_ctx: int = 8192,
        n_threads: int | None = None,
        logprobs: bool = False,
        prompt_cache_mb: int = 0,
    ) -> None:
        try:
            from llama_cpp.llama import Llama
            from llama_cpp.llama_cache import LlamaRAMCache
        except ImportError as exc:  # pragma: no cover - llama-cpp-python is a dependency
            raise BackendRequestError(
                "the embedded backend needs llama-cpp-python: pip install llama-cpp-python"
            ) from exc
        self.model = model_name or model_path.stem
        self.model_path = model_path
        self.logprobs_enabled = logprobs
        started = time.perf_counter()
        try:
            self._llm: Llama | None = Llama(
                model_path=str(model_path),
                n_ctx=n_ctx,
                n_threads=n_threads,
                logits_all=logprobs,
                verbose=False,
            )
        except (ValueError, RuntimeError) as exc:
            raise ModelFileError(f"llama.cpp could not load {model_path}: {exc}") from exc
        if prompt_cache_mb > 0:
            self._llm.set_cache(LlamaRAMCache(capacity_bytes=prompt_cache_mb * 1024 * 1024))
        self.n_ctx = n_ctx
        self._async_lock = asyncio.Lock()
        self._thread_lock = threading.Lock()
        """Held by the worker thread itself: a cancelled caller releases the asyncio lock,
        while its generation still runs to the end."""
        self._grammars: dict[str, LlamaGrammar | None] = {}
        log.info(
            "embedded.loaded model=%s path=%s n_ctx=%d seconds=%.2f",
            self.model,
            model_path,
            n_ctx,
            time.perf_counter() - started,
        )

    @classmethod
    def from_settings(cls, settings: LLMSettings) -> "EmbeddedBackend":
        from rubricate.llm.model_files import resolve_model_path

        path = resolve_model_path(settings)
        if settings.model:
            name = settings.model
        elif settings.model_path is not None:
            name = path.stem
        else:
            name = settings.embedded_model
        return cls(
            model_path=path,
            model_name=name,
            n_ctx=settings.n_ctx,
            n_threads=settings.n_threads,
            logprobs=settings.embedded_logprobs,
            prompt_cache_mb=settings.prompt_cache_mb,
        )

    async def complete(self, messages: Sequence[Message], params: GenerationParams) -> Completion:
        if params.logprobs and not self.logprobs_enabled:
            raise BackendRequestError(
                "logprobs need the model loaded with all logits: "
                "set RUBRICATE_LLM_EMBEDDED_LOGPROBS=true"
            )
        kwargs = self._request(messages, params)
        async with self._async_lock:
            started = time.perf_counter()
            response = await asyncio.to_thread(self._run, kwargs)
            latency = time.perf_counter() - started
        return completion_from_response(
            response, latency_s=latency, model=self.model, backend=self.name
        )

    def _request(self, messages: Sequence[Message], params: GenerationParams) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "messages": chat_messages(messages),
            "temperature": params.temperature,
            "top_p": params.top_p,
            # top_k bounds the candidates the JSON grammar must check per token: with
            # top_k=0 every step tests all ~150k vocabulary entries (measured ~0.5 s/token
            # on 2 cores). Greedy decoding (temperature 0) is unaffected.
            "top_k": _TOP_K,
            "min_p": 0.0,
            "repeat_penalty": 1.0,
            "max_tokens": params.max_tokens,
            "seed": params.seed,
            "stop": list(params.stop) or None,
        }
        if params.json_schema is not None:
            grammar = self._grammar(params.json_schema)
            if grammar is not None:
                kwargs["grammar"] = grammar
            else:
                kwargs["response_format"] = {"type": "json_object"}
        if params.logprobs:
            kwargs["logprobs"] = True
            kwargs["top_logprobs"] = params.logprobs
        return kwargs

    def _grammar(self, schema: dict[str, Any]) -> "LlamaGrammar | None":
        key = json.dumps(schema, sort_keys=True)
        if key not in self._grammars:
            from llama_cpp.llama_grammar import LlamaGrammar

            # property order matters (the grammar fixes it): convert the unsorted schema
            text = json.dumps(enumerate_small_int_ranges(schema))
            try:
                self._grammars[key] = LlamaGrammar.from_json_schema(text, verbose=False)
            except Exception as exc:  # the converter raises bare asserts and ValueErrors
                log.warning(
                    "embedded.schema_unsupported title=%s error=%s: constraining to any JSON",
                    schema.get("title"),
                    exc,
                )
                self._grammars[key] = None
        return self._grammars[key]

    def _run(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        with self._thread_lock:
            if self._llm is None:
                raise BackendRequestError("the embedded backend is closed")
            try:
                response = self._llm.create_chat_completion(**kwargs)
            except ValueError as exc:  # e.g. "Requested tokens (9000) exceed context window"
                raise BackendRequestError(f"llama.cpp rejected the request: {exc}") from exc
            except RuntimeError as exc:  # e.g. a failed llama_decode
                raise BackendRequestError(f"llama.cpp failed: {exc}") from exc
        return cast(dict[str, Any], response)

    async def ready(self) -> bool:
        return self._llm is not None

    async def aclose(self) -> None:
        async with self._async_lock:
            await asyncio.to_thread(self._close)

    def _close(self) -> None:
        with self._thread_lock:
            if self._llm is not None:
                self._llm.close()
                self._llm = None


_MAX_ENUMERATED_INTS = 64


def enumerate_small_int_ranges(schema: Any) -> Any:
    """`schema` with bounded integer ranges of up to 64 values also given as an `enum`.

    llama.cpp's Python JSON-schema converter ignores minimum/maximum, so a score of
    `0..2` could decode as `2000000`; an enum constrains it.
    """
    if isinstance(schema, list):
        return [enumerate_small_int_ranges(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: enumerate_small_int_ranges(v) for k, v in schema.items()}
    if out.get("type") == "integer" and "enum" not in out:
        low = _int_bound(out, "minimum", "exclusiveMinimum", +1)
        high = _int_bound(out, "maximum", "exclusiveMaximum", -1)
        if low is not None and high is not None and 0 <= high - low < _MAX_ENUMERATED_INTS:
            out["enum"] = list(range(low, high + 1))
    return out


def _int_bound(schema: dict[str, Any], inclusive: str, exclusive: str, step: int) -> int | None:
    value = schema.get(inclusive)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return math.ceil(value) if step > 0 else math.floor(value)
    value = schema.get(exclusive)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return (math.floor(value) + 1) if step > 0 else (math.ceil(value) - 1)
    return None
