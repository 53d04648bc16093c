"""Nugget labelling on the verifier: every (block, nugget batch) pair is one model call.

Calls are issued block-major (all batches of block 1, then block 2, ...) so a backend that
serves one call at a time (llama.cpp) sees consecutive prompts with the same block prefix
and reuses its KV cache; a concurrent backend (vLLM) gets them all at once, up to
`concurrency`. On the embedded backend whole requests also run one at a time, so the calls
of concurrent requests (a trainer's batch) do not interleave and evict each other's block
prefix. A reply with the wrong number of labels, or none, gets one repair call that
quotes the problem; if that fails too the whole request fails with `OutputParseError`
(HTTP 502 `judge_output_invalid`) carrying the usage spent, never a label made up.
"""

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from rubricate.common.metrics import JUDGE_LATENCY, LLM_RETRIES, LLM_TOKENS, PARSE_FAILURES
from rubricate.common.model_server import TaskSettings
from rubricate.common.schemas import UsageOut
from rubricate.core.nuggets import (
    DEFAULT_BATCH_SIZE,
    EMBEDDED_BATCH_SIZE,
    MAX_BATCH_SIZE,
    Label,
    NuggetMode,
    labels_for,
)
from rubricate.llm.base import Completion, GenerationParams, LLMBackend, Message
from rubricate.llm.errors import LLMError, OutputParseError, TransportError
from rubricate.llm.retry import call_with_retries
from rubricate.llm.settings import LLMSettings
from rubricate.llm.tasks import nugget_labels
from rubricate.llm.tasks.nugget_formats import (
    LabelFormat,
    LabelParseError,
    ParsedLabels,
    label_distributions,
    parse_labels,
)
from rubricate.llm.usage import Usage
from rubricate.verifier.nugget_schemas import (
    BlockLabels,
    NuggetLabelsRequest,
    NuggetLabelsResponse,
)

log = logging.getLogger("rubricate.verifier.nuggets")

TASK = "nugget_verification"  # the judge metrics' task label (common.metrics.JUDGE_TASKS)


class NuggetTaskSettings(BaseSettings):
    """Nugget-label calls on the verifier (env prefix RUBRICATE_NUGGET_TASK_)."""

    model_config = SettingsConfigDict(env_prefix="RUBRICATE_NUGGET_TASK_", extra="ignore")

    batch_size: int | None = Field(default=None, ge=1, le=MAX_BATCH_SIZE)
    """Nuggets per call when a request does not say; unset: 1 on the embedded backend
    (a small CPU model), 10 on served backends (Search-Gen-V's batches)."""
    output_format: LabelFormat = "json"
    """The format the prompt asks for (any of the ten is accepted in replies)."""
    constrain: bool = True
    """With `json` and no reasoning, send a JSON schema of exactly n labels, so backends
    that enforce schemas (llama.cpp grammar, vLLM guided decoding) cannot miscount."""
    reasoning: bool = False
    """Ask for a short <reasoning> section before the labels (slower; off on CPU)."""
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    max_tokens_per_nugget: int = Field(default=12, ge=4)
    reasoning_max_tokens: int = Field(default=600, ge=32)
    max_block_chars: int = Field(default=6000, ge=200)
    """A longer block is clipped (head and tail kept) in the prompt."""
    concurrency: int = Field(default=16, ge=1)
    """Model calls in flight per request."""
    top_logprobs: int = Field(default=5, ge=2, le=20)
    """Alternatives per token read for label probabilities."""


@dataclass
class _Call:
    parsed: ParsedLabels
    probabilities: list[dict[Label, float] | None] | None
    repaired: bool


class NuggetLabelService:
    def __init__(
        self,
        *,
        backend: LLMBackend,
        llm: LLMSettings,
        settings: NuggetTaskSettings | None = None,
    ) -> None:
        self.backend = backend
        self.llm = llm
        self.settings = settings or NuggetTaskSettings()
        self._one_request_at_a_time = asyncio.Lock() if backend.name == "embedded" else None

    @classmethod
    def factory(
        cls, backend: LLMBackend, _tasks: TaskSettings, llm: LLMSettings
    ) -> "NuggetLabelService":
        return cls(backend=backend, llm=llm)

    def default_batch_size(self) -> int:
        if self.settings.batch_size is not None:
            return self.settings.batch_size
        return EMBEDDED_BATCH_SIZE if self.backend.name == "embedded" else DEFAULT_BATCH_SIZE

    async def label(self, request: NuggetLabelsRequest) -> NuggetLabelsResponse:
        if self._one_request_at_a_time is None:
            return await self._label(request)
        async with self._one_request_at_a_time:
            return await self._label(request)

    async def _label(self, request: NuggetLabelsRequest) -> NuggetLabelsResponse:
        nuggets = request.nuggets
        size = request.batch_size or self.default_batch_size()
        batches = [(k, nuggets[k : k + size]) for k in range(0, len(nuggets), size)]
        jobs = [(b, k, batch) for b in range(len(request.blocks)) for k, batch in batches]
        usage = Usage()
        gate = asyncio.Semaphore(self.settings.concurrency)

        async def run(b: int, batch: Sequence[str]) -> _Call:
            async with gate:
                return await self._judge(request, b, batch, usage)

        started = time.perf_counter()
        tasks = [asyncio.ensure_future(run(b, batch)) for b, _, batch in jobs]
        try:
            results = await asyncio.gather(*tasks)
        except BaseException:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        finally:
            elapsed = time.perf_counter() - started
            JUDGE_LATENCY.labels(TASK, request.mode, self.backend.name).observe(elapsed)
            LLM_TOKENS.labels(TASK, self.backend.name, "prompt").inc(usage.prompt_tokens)
            LLM_TOKENS.labels(TASK, self.backend.name, "completion").inc(usage.completion_tokens)

        blocks: list[BlockLabels] = []
        for b in range(len(request.blocks)):
            labels: list[Label] = []
            probs: list[dict[Label, float] | None] = []
            for (jb, _, _), call in zip(jobs, results, strict=True):
                if jb == b:
                    labels.extend(call.parsed.labels)
                    probs.extend(call.probabilities or [None] * len(call.parsed.labels))
            blocks.append(
                BlockLabels(
                    labels=labels, probabilities=probs if request.label_probabilities else None
                )
            )
        log.info(
            "nuggets.labelled blocks=%d nuggets=%d calls=%d seconds=%.2f",
            len(request.blocks),
            len(nuggets),
            usage.calls,
            elapsed,
        )
        return NuggetLabelsResponse(
            batch_size=size,
            blocks=blocks,
            repairs=sum(1 for call in results if call.repaired),
            formats=[call.parsed.format for call in results],
            usage=UsageOut.of(usage),
            model=self.backend.model,
            backend=self.backend.name,
        )

    def _params(self, *, n: int, mode: NuggetMode, logprobs: bool) -> GenerationParams:
        s = self.settings
        schema = None
        if s.output_format == "json" and s.constrain and not s.reasoning:
            schema = nugget_labels.labels_schema(n=n, labels=labels_for(mode))
        max_tokens = 16 + s.max_tokens_per_nugget * n
        if s.reasoning:
            max_tokens += s.reasoning_max_tokens
        return GenerationParams(
            temperature=s.temperature,
            max_tokens=max_tokens,
            json_schema=schema,
            schema_name=nugget_labels.SCHEMA_NAME,
            logprobs=s.top_logprobs if logprobs else None,
        )

    async def _judge(
        self, request: NuggetLabelsRequest, b: int, batch: Sequence[str], usage: Usage
    ) -> _Call:
        s = self.settings
        allowed = labels_for(request.mode)
        messages = nugget_labels.build_messages(
            question=request.question,
            block=request.blocks[b],
            block_index=b,
            n_blocks=len(request.blocks),
            nuggets=batch,
            mode=request.mode,
            fmt=s.output_format,
            reasoning=s.reasoning,
            max_block_chars=s.max_block_chars,
        )
        params = self._params(n=len(batch), mode=request.mode, logprobs=request.label_probabilities)
        first = await self._call(messages, params, usage)
        try:
            return self._accept(first, n=len(batch), allowed=allowed, repaired=False)
        except LabelParseError as exc:
            reason = str(exc)
        LLM_RETRIES.labels(TASK, "repair").inc()
        log.warning("llm.repair task=%s backend=%s reason=%s", TASK, self.backend.name, reason)
        repair = [
            *messages,
            Message("assistant", first.text),
            nugget_labels.repair_message(
                reason=reason, fmt=s.output_format, n=len(batch), mode=request.mode
            ),
        ]
        second = await self._call(repair, params, usage)
        try:
            return self._accept(second, n=len(batch), allowed=allowed, repaired=True)
        except LabelParseError as exc:
            PARSE_FAILURES.labels(TASK).inc()
            raise OutputParseError(
                f"{TASK}: block {b + 1}: invalid labels after a repair retry: {exc}",
                raw=second.text,
                usage=replace(usage),
            ) from None

    @staticmethod
    def _accept(
        completion: Completion, *, n: int, allowed: Sequence[Label], repaired: bool
    ) -> _Call:
        parsed = parse_labels(completion.text, expected=n, allowed=allowed)
        probabilities = None
        if completion.logprobs is not None:
            probabilities = label_distributions(
                completion.text, parsed.spans, completion.logprobs, allowed=allowed
            )
        return _Call(parsed=parsed, probabilities=probabilities, repaired=repaired)

    async def _call(
        self, messages: Sequence[Message], params: GenerationParams, usage: Usage
    ) -> Completion:
        def on_retry(n: int, exc: TransportError, delay: float) -> None:
            LLM_RETRIES.labels(TASK, "transport").inc()
            log.warning(
                "llm.retry task=%s backend=%s retry=%d delay_s=%.2f error=%s",
                TASK,
                self.backend.name,
                n,
                delay,
                exc,
            )

        try:
            completion = await call_with_retries(
                lambda: self.backend.complete(messages, params),
                max_retries=self.llm.max_retries,
                base_s=self.llm.backoff_base_s,
                max_s=self.llm.backoff_max_s,
                on_retry=on_retry,
            )
        except LLMError as exc:
            usage.merge(exc.usage)
            exc.usage = replace(usage)
            raise
        usage.record(
            prompt_tokens=completion.prompt_tokens,
            completion_tokens=completion.completion_tokens,
            latency_s=completion.latency_s,
        )
        return completion
