"""EmbeddedBackend: a GGUF model on CPU through llama.cpp (llama-cpp-python), in process.

One `Llama` instance is loaded at construction and shared by every call; calls run one at a
time in a worker thread (a llama.cpp context is not thread-safe), so consecutive prompts that
share a prefix (the task's system prompt, a repair call's conversation) reuse the KV cache.
`prompt_cache_mb` adds a `LlamaRAMCache` for prefixes across alternating prompts; it is off
by default: saving and restoring a state costs about a second per call on CPU, about what it
saves on a judge system prompt.

A JSON schema becomes a llama.cpp grammar (the same conversion `response_format=
{"type": "json_object", "schema": ...}` does), converted once per schema; greedy decoding
under it (temperature 0, the judges' default) asks the grammar about the likeliest tokens
first (`llm.greedy_grammar`) instead of the whole vocabulary; unlike
`response_format`, a schema the converter cannot handle is logged instead of silently
replaced by free JSON. The converter ignores numeric bounds, so small bounded integer
ranges (a 0..2 score) are enumerated first. Sampling follows OpenAI semantics (no repeat
penalty, top-k or min-p), so the embedded and served backends decode alike.

The prompt is rendered from the model's own chat template (the one `create_chat_completion`
would use) and tokenized in pieces: the template's text with special tokens enabled, every
message's text with them disabled (`prompt_tokens`). Text inside a message (a rollout, an
answer) can therefore never become a control token such as `<|im_start|>`, whatever it
spells (GitHub issue 17); llama-cpp-python's own chat handler tokenizes the whole rendered
prompt with special tokens enabled. Generation and choice scoring share this tokenization,
so they share the KV cache.
"""

import asyncio
import json
import logging
import math
import re
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from rubricate.llm.base import ChoiceScores, Completion, GenerationParams, LLMBackend, Message
from rubricate.llm.errors import BackendRequestError, ModelFileError
from rubricate.llm.greedy_grammar import decode_greedy
from rubricate.llm.openai_format import chat_messages, completion_from_response
from rubricate.llm.settings import LLMSettings

if TYPE_CHECKING:
    from llama_cpp.llama import Llama
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter
    from llama_cpp.llama_grammar import LlamaGrammar

log = logging.getLogger("rubricate.llm.embedded")


_TOP_K = 40


class EmbeddedBackend(LLMBackend):
    name = "embedded"
    supports_choice_scoring = True
    supports_reply_prefix = True

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
                n_threads_batch=n_threads,  # prompt reading too (llama-cpp-python: all cores)
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
        self._closing = threading.Event()
        """Set by `aclose`: a generation in flight stops at its next token and fails, so closing
        (a service's shutdown, a test's platform) does not wait out a long background call."""
        """Held by the worker thread itself: a cancelled caller releases the asyncio lock,
        while its generation still runs to the end."""
        self._grammars: dict[str, str | None] = {}
        """GBNF grammars by JSON schema (None: the converter could not)."""
        self._formatter: Jinja2ChatFormatter | None = None
        self._first_tokens: dict[tuple[str, tuple[str, ...]], list[int]] = {}
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
            "messages": messages,
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
            gbnf = self._grammar(params.json_schema)
            if gbnf is None:  # any JSON value, as `response_format={"type": "json_object"}`
                from llama_cpp.llama_grammar import JSON_GBNF

                gbnf = JSON_GBNF
            kwargs["grammar"] = gbnf
        if params.logprobs:
            kwargs["logprobs"] = params.logprobs
        return kwargs

    def _grammar(self, schema: dict[str, Any]) -> str | None:
        """The schema's GBNF grammar (converted once), None if the converter cannot."""
        key = json.dumps(schema, sort_keys=True)
        if key not in self._grammars:
            from llama_cpp.llama_grammar import json_schema_to_gbnf

            # property order matters (the grammar fixes it): convert the unsorted schema
            text = json.dumps(enumerate_small_int_ranges(schema))
            try:
                self._grammars[key] = json_schema_to_gbnf(text)
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
            llm = self._llm
            kwargs = dict(kwargs)
            messages: Sequence[Message] = kwargs.pop("messages")
            try:
                if not llm.metadata.get("tokenizer.chat_template"):
                    # no template to render: llama-cpp-python's fallback chat format
                    if kwargs.get("logprobs"):
                        kwargs["top_logprobs"], kwargs["logprobs"] = kwargs["logprobs"], True
                    if kwargs.get("grammar") is not None:
                        kwargs["grammar"] = llama_grammar(kwargs["grammar"])
                    raw = llm.create_chat_completion(
                        messages=cast(Any, chat_messages(messages)), **kwargs
                    )
                    return cast(dict[str, Any], raw)
                formatter = self._chat_formatter(llm)
                prompt = prompt_tokens(llm, formatter, messages)
                eos = [formatter.eos_token] if formatter.eos_token else []
                kwargs["stop"] = [*(kwargs["stop"] or []), *eos]
                reused = _shared_prefix(llm, prompt)
                started = time.perf_counter()
                gbnf = kwargs.pop("grammar", None)
                if gbnf is not None and kwargs["temperature"] == 0 and not kwargs.get("logprobs"):
                    completion = self._greedy(llm, prompt, gbnf, kwargs, reused)
                else:
                    kwargs["stopping_criteria"] = self._stop_when_closing()
                    if gbnf is not None:
                        kwargs["grammar"] = llama_grammar(gbnf)
                    completion = cast(
                        dict[str, Any], llm.create_completion(prompt=prompt, **kwargs)
                    )
                response = chat_response(completion)
                log.debug(
                    "embedded.call kind=generate prompt=%d reused=%d completion=%s seconds=%.2f",
                    len(prompt),
                    reused,
                    (response.get("usage") or {}).get("completion_tokens"),
                    time.perf_counter() - started,
                )
            except ValueError as exc:  # e.g. "Requested tokens (9000) exceed context window"
                raise BackendRequestError(f"llama.cpp rejected the request: {exc}") from exc
            except RuntimeError as exc:  # e.g. a failed llama_decode
                raise BackendRequestError(f"llama.cpp failed: {exc}") from exc
            if self._closing.is_set():  # cut short: never a judgment
                raise BackendRequestError("the embedded backend closed during the call")
        return response

    def _greedy(
        self, llm: "Llama", prompt: list[int], gbnf: str, kwargs: dict[str, Any], reused: int
    ) -> dict[str, Any]:
        """Greedy decoding under the grammar, likeliest tokens checked first
        (`llm.greedy_grammar`), in llama-cpp-python's completion shape."""
        from llama_cpp.llama_grammar import LLAMA_GRAMMAR_DEFAULT_ROOT

        room = self.n_ctx - len(prompt)  # llama-cpp-python's budget: what the context holds
        if room <= 0:
            raise ValueError(
                f"Requested tokens ({len(prompt)}) exceed context window of {self.n_ctx}"
            )
        wanted = kwargs["max_tokens"]  # None or <= 0: up to the context, as llama-cpp-python
        max_tokens = room if wanted is None or wanted <= 0 else min(wanted, room)
        decoded = decode_greedy(
            llm,
            prompt,
            grammar=gbnf,
            root=LLAMA_GRAMMAR_DEFAULT_ROOT,
            max_tokens=max_tokens,
            stop=kwargs["stop"] or [],
            cached=reused,
            cut_short=self._closing.is_set,
        )
        return {
            "id": "cmpl-greedy",
            "object": "text_completion",
            "model": self.model,
            "choices": [
                {
                    "index": 0,
                    "text": decoded.text,
                    "logprobs": None,
                    "finish_reason": decoded.finish_reason,
                }
            ],
            "usage": {
                "prompt_tokens": len(prompt),
                "completion_tokens": len(decoded.tokens),
                "total_tokens": len(prompt) + len(decoded.tokens),
            },
        }

    def _stop_when_closing(self) -> Any:
        from llama_cpp.llama import StoppingCriteriaList

        closing = self._closing
        return StoppingCriteriaList([lambda _ids, _logits: closing.is_set()])

    async def score_choices(
        self, messages: Sequence[Message], *, reply_prefix: str, choices: Sequence[str]
    ) -> ChoiceScores:
        async with self._async_lock:
            started = time.perf_counter()
            logprobs, prompt_tokens = await asyncio.to_thread(
                self._score, messages, reply_prefix, tuple(choices)
            )
            latency = time.perf_counter() - started
        return ChoiceScores(
            logprobs=logprobs,
            prompt_tokens=prompt_tokens,
            latency_s=latency,
            model=self.model,
            backend=self.name,
        )

    def _score(
        self, messages: Sequence[Message], reply_prefix: str, choices: tuple[str, ...]
    ) -> tuple[dict[str, float], int]:
        """One forward pass over the chat prompt + `reply_prefix`; log-softmax of the last
        position's logits at each choice's first token. The prompt shares the KV cache with
        `create_chat_completion` (same prefix matching), so a cached answer block is reused.
        """
        import llama_cpp
        import numpy as np

        with self._thread_lock:
            llm = self._llm
            if llm is None:
                raise BackendRequestError("the embedded backend is closed")
            # tokenized as for generation, so both paths share the KV cache; the reply
            # prefix is plain text
            tokens = prompt_tokens(llm, self._chat_formatter(llm), messages)
            tokens += llm.tokenize(reply_prefix.encode("utf-8"), add_bos=False, special=False)
            if len(tokens) >= self.n_ctx:
                raise BackendRequestError(
                    f"llama.cpp rejected the request: prompt of {len(tokens)} tokens exceeds "
                    f"the context window ({self.n_ctx})"
                )
            first = self._choice_tokens(llm, reply_prefix, choices)
            cached = min(_shared_prefix(llm, tokens), len(tokens) - 1)  # the last is evaluated
            llm.n_tokens = cached
            started = time.perf_counter()
            try:
                llm.eval(tokens[cached:])
            except RuntimeError as exc:
                llm.n_tokens = 0
                raise BackendRequestError(f"llama.cpp failed: {exc}") from exc
            log.debug(
                "embedded.call kind=choices prompt=%d reused=%d seconds=%.2f",
                len(tokens),
                cached,
                time.perf_counter() - started,
            )
            pointer = llama_cpp.llama_get_logits_ith(llm.ctx, -1)
            logits = np.ctypeslib.as_array(pointer, shape=(llm.n_vocab(),)).astype(np.float64)
            top = float(logits.max())
            log_total = top + float(np.log(np.exp(logits - top).sum()))
            return {
                c: float(logits[t]) - log_total for c, t in zip(choices, first, strict=True)
            }, len(tokens)

    def _chat_formatter(self, llm: "Llama") -> "Jinja2ChatFormatter":
        if self._formatter is None:
            from llama_cpp.llama_chat_format import Jinja2ChatFormatter

            template = llm.metadata.get("tokenizer.chat_template")
            if not template:
                raise BackendRequestError(f"{self.model_path.name} has no chat template")
            self._formatter = Jinja2ChatFormatter(
                template=template,
                eos_token=_token_text(llm, llm.token_eos()),
                bos_token=_token_text(llm, llm.token_bos()),
            )
        return self._formatter

    def _choice_tokens(
        self, llm: "Llama", reply_prefix: str, choices: tuple[str, ...]
    ) -> list[int]:
        key = (reply_prefix, choices)
        if key not in self._first_tokens:
            base = llm.tokenize(reply_prefix.encode("utf-8"), add_bos=False, special=False)
            first: list[int] = []
            for choice in choices:
                full = llm.tokenize(
                    (reply_prefix + choice).encode("utf-8"), add_bos=False, special=False
                )
                if full[: len(base)] != base or len(full) == len(base):
                    raise BackendRequestError(
                        f"choice {choice!r} does not tokenize as a continuation of {reply_prefix!r}"
                    )
                first.append(full[len(base)])
            if len(set(first)) != len(first):
                raise BackendRequestError(
                    f"choices {list(choices)} share a first token after {reply_prefix!r}: "
                    "they cannot be told apart in one step"
                )
            self._first_tokens[key] = first
        return self._first_tokens[key]

    async def ready(self) -> bool:
        return self._llm is not None

    async def aclose(self) -> None:
        self._closing.set()
        async with self._async_lock:
            await asyncio.to_thread(self._close)

    def _close(self) -> None:
        with self._thread_lock:
            if self._llm is not None:
                self._llm.close()
                self._llm = None


_SLOT = "\ue000{}\ue001"
_SLOT_RE = re.compile("\ue000(\\d+)\ue001")
"""Placeholders (private-use characters) for the message texts while the template renders."""


def prompt_tokens(
    llm: "Llama", formatter: "Jinja2ChatFormatter", messages: Sequence[Message]
) -> list[int]:
    """The chat prompt's tokens, with special tokens parsed only in the template's own text.

    The template is rendered with a placeholder in place of each message's text; the pieces
    between placeholders (role headers, `<|im_start|>`, `<|im_end|>`, the generation prompt)
    are tokenized with special tokens enabled, each message's text with them disabled, so a
    message spelling `<|im_start|>` yields the characters' ordinary tokens. As in
    llama-cpp-python's Jinja chat handler, no BOS is added beyond what the template writes.
    """
    slots = [Message(m.role, _SLOT.format(i)) for i, m in enumerate(messages)]
    rendered = formatter(messages=cast(Any, chat_messages(slots))).prompt
    pieces = _SLOT_RE.split(rendered)
    tokens: list[int] = []
    for n, piece in enumerate(pieces):
        if n % 2 == 1:  # a placeholder's message number
            text, special = messages[int(piece)].content, False
        else:
            text, special = piece, True
        if text:
            tokens += llm.tokenize(text.encode("utf-8"), add_bos=False, special=special)
    return tokens


def llama_grammar(gbnf: str) -> "LlamaGrammar":
    """llama-cpp-python's grammar object for `gbnf` (its sampler chain's path)."""
    from llama_cpp.llama_grammar import LlamaGrammar

    return LlamaGrammar.from_string(gbnf, verbose=False)


def _shared_prefix(llm: "Llama", tokens: Sequence[int]) -> int:
    """How many leading `tokens` the context already holds (the KV cache llama.cpp reuses)."""
    held = llm.input_ids
    limit = min(llm.n_tokens, len(tokens))
    n = 0
    while n < limit and held[n] == tokens[n]:
        n += 1
    return n


def chat_response(completion: dict[str, Any]) -> dict[str, Any]:
    """A llama-cpp-python text completion in the chat-completion shape `completion_from_response`
    reads (the conversion llama-cpp-python's chat handler makes)."""
    choice = completion["choices"][0]
    logprobs = choice.get("logprobs")
    content_logprobs = None
    if logprobs is not None:
        content_logprobs = {
            "content": [
                {
                    "token": token,
                    "logprob": logprob,
                    "top_logprobs": [{"token": t, "logprob": lp} for t, lp in (top or {}).items()],
                }
                for token, logprob, top in zip(
                    logprobs["tokens"],
                    logprobs["token_logprobs"],
                    logprobs["top_logprobs"],
                    strict=True,
                )
            ]
        }
    return {
        "id": "chat" + str(completion.get("id", "")),
        "object": "chat.completion",
        "model": completion.get("model"),
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": choice["text"]},
                "logprobs": content_logprobs,
                "finish_reason": choice.get("finish_reason"),
            }
        ],
        "usage": completion.get("usage"),
    }


def _token_text(llm: "Llama", token: int) -> str:
    if token < 0:
        return ""
    return llm.detokenize([token], special=True).decode("utf-8", "replace")


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
