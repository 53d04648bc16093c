"""Nugget labelling on the verifier: every (block, nugget batch) pair is one model call.

Calls are issued block-major (all batches of block 1, then block 2, ...) so a backend that
serves one call at a time (llama.cpp) sees consecutive prompts with the same block prefix
and reuses its KV cache; a concurrent backend with one shared prefix cache (vLLM) gets
them all at once, up to `concurrency`. On a backend that takes one call at a time
(embedded) whole requests also run one at a time, and on one with a cache per slot
(`RUBRICATE_LLM_PREFIX_CACHE=per_slot`, llama.cpp's `llama-server`) a request's calls run
back to back with one request per slot (`llm.request_gate`), so the calls of concurrent
requests (a trainer's batch) do not interleave and evict each other's block prefix.

Two designs (chosen by measurement, docs/judge-quality.md). `generate`: the model writes the
label list. `choices` (the default on the embedded backend; on a served backend that returns
log-probabilities and continues a final assistant message, e.g. vLLM with
`RUBRICATE_LLM_OPENAI_CONTINUE_FINAL_MESSAGE=true`, when chosen): one
forward pass per (block, nugget) over the prompt plus the reply's opening `["` reads
p(label) at each label's first token; nothing is decoded, so there is nothing to parse or
repair. In long mode a fitted `LabelCalibration` for the backend's model (shipped under
`nuggets/verifier/calibrations/`, or `RUBRICATE_NUGGET_TASK_CALIBRATION=FILE`) turns those
probabilities and the word overlap into calibrated ones; the label is the most probable.

In the generate design a reply with the wrong number of labels, or none, gets one repair
call that quotes the problem; if that fails too the whole request fails with
`OutputParseError` (HTTP 502 `judge_output_invalid`) carrying the usage spent, never a
label made up.

A block whose text addresses the judge (`llm.prompt_text.addressing_by_part`: fence tags,
control tokens, a sheet of labels, a demand to label it supported, a claim that every
statement is confirmed, such text split across blocks, ...) is withheld from the model: it
supports no nugget, and the response lists what was found per block (`judge_addressing`),
so the gateway reports it instead of silently dropping the block (GitHub issue 25).
"""

import asyncio
import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Literal, Unpack

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from rubricate.common.usage import Usage
from rubricate.llm.assertions import shown_text
from rubricate.llm.base import Completion, GenerationParams, Message
from rubricate.llm.calls import (
    Rejected,
    complete,
    gather_or_cancel,
    judge_metrics,
    repaired,
    scored_choices,
)
from rubricate.llm.prompt_text import addressing_by_part
from rubricate.llm.request_gate import RequestGate
from rubricate.llm.retry import ensure_time_left
from rubricate.llm.task_service import TaskService, TaskServiceArgs
from rubricate.nuggets.domain.calibration import LabelCalibration
from rubricate.nuggets.domain.lexical import overlap
from rubricate.nuggets.domain.rewards import DEFAULT_BATCH_SIZE, EMBEDDED_BATCH_SIZE, labels_for
from rubricate.nuggets.prompts import labels as nugget_labels
from rubricate.nuggets.prompts.formats import (
    LabelFormat,
    LabelParseError,
    ParsedLabels,
    label_distributions,
    parse_labels,
)
from rubricate.nuggets.verifier.schemas import (
    BlockLabels,
    NuggetLabelsRequest,
    NuggetLabelsResponse,
)
from rubricate_client.errors import DomainError
from rubricate_client.schemas.nuggets import MAX_BATCH_SIZE, Label, NuggetMode

log = logging.getLogger("rubricate.nuggets.verifier.service")

TASK = "nugget_verification"  # the judge metrics' task label (common.metrics.JUDGE_TASKS)

REPLY_PREFIX = '["'
"""How a JSON label reply opens: the choices design reads the next token after it."""

Design = Literal["generate", "choices"]


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
    """Model calls in flight per request (1 where the backend's passes go back to back:
    `llm.request_gate`)."""
    top_logprobs: int = Field(default=5, ge=2, le=20)
    """Alternatives per token read for label probabilities."""
    design: Literal["auto", "generate", "choices"] = "auto"
    """`auto`: `choices` on the embedded backend when the prompt asks for JSON without
    reasoning, else `generate`. `choices` on a served backend needs log-probabilities and
    `RUBRICATE_LLM_OPENAI_CONTINUE_FINAL_MESSAGE=true` (vLLM)."""
    examples: bool = False
    """Add worked examples of the three labels to the system prompt (long mode)."""
    calibration: str = "auto"
    """Long-mode label calibration for the choices design: `auto` (the shipped one for the
    backend's model, if any), `off` (the most probable raw label), or a JSON file path."""


def shipped_calibration(model: str) -> LabelCalibration | None:
    """The calibration shipped for `model` (nuggets/verifier/calibrations/MODEL.json), if any."""
    folder = resources.files("rubricate.nuggets.verifier") / "calibrations"
    entry = folder / f"{model}.json"
    if not entry.is_file():
        return None
    return LabelCalibration.loads(entry.read_text(encoding="utf-8"))


def load_calibration(setting: str, *, model: str) -> LabelCalibration | None:
    """The calibration `setting` names for a backend serving `model`.

    A file fitted for another model is refused (its weights mean nothing for this one).
    """
    if setting == "off":
        return None
    if setting == "auto":
        return shipped_calibration(model)
    path = Path(setting).expanduser()
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise DomainError(
            f"RUBRICATE_NUGGET_TASK_CALIBRATION={setting}: cannot read it ({exc})",
            field="calibration",
        ) from exc
    calibration = LabelCalibration.loads(text)
    if calibration.model != model:
        raise DomainError(
            f"RUBRICATE_NUGGET_TASK_CALIBRATION={setting} was fitted for {calibration.model!r}, "
            f"but the backend serves {model!r}",
            field="calibration",
        )
    return calibration


@dataclass
class _Call:
    parsed: ParsedLabels
    probabilities: list[dict[Label, float] | None] | None
    repaired: bool


class NuggetLabelService(TaskService):
    """The verifier's nugget labels task (its settings: `NuggetTaskSettings`)."""

    def __init__(
        self,
        *,
        settings: NuggetTaskSettings | None = None,
        withhold: bool = True,
        **common: Unpack[TaskServiceArgs],
    ) -> None:
        """`withhold=False` shows the judge blocks that address it (still flagged): only
        for measuring what the model and the grounding check do on their own
        (`rubricate eval injection --defence`); the served verifier always withholds."""
        super().__init__(**common)
        self.withhold = withhold
        self.settings = settings or NuggetTaskSettings()
        self.gate = RequestGate(self.llm, self.backend.name)
        self.design: Design = self._design()
        self.calibration = (
            load_calibration(self.settings.calibration, model=self.backend.model)
            if self.design == "choices"
            else None
        )

    def _design(self) -> Design:
        s = self.settings
        can = (
            self.backend.supports_choice_scoring
            and self.backend.supports_reply_prefix
            and s.output_format == "json"
            and not s.reasoning
        )
        if s.design == "choices" and not can:
            raise DomainError(
                "RUBRICATE_NUGGET_TASK_DESIGN=choices needs a backend that scores choices "
                "after a reply prefix (embedded, or a server that returns log-probabilities "
                "and continues a final assistant message, e.g. vLLM with "
                f"RUBRICATE_LLM_OPENAI_CONTINUE_FINAL_MESSAGE=true; this is "
                f"{self.backend.name}) and output_format=json without reasoning",
                field="design",
            )
        if s.design == "auto":  # as the stagewise scorer (docs/llm.md)
            return "choices" if can and self.backend.name == "embedded" else "generate"
        return s.design

    def default_batch_size(self) -> int:
        """Nuggets per call in the generate design (choices is always one per pass)."""
        if self.settings.batch_size is not None:
            return self.settings.batch_size
        return EMBEDDED_BATCH_SIZE if self.backend.name == "embedded" else DEFAULT_BATCH_SIZE

    async def label(self, request: NuggetLabelsRequest) -> NuggetLabelsResponse:
        async with self.gate.request():
            return await self._label(request)

    async def _label(self, request: NuggetLabelsRequest) -> NuggetLabelsResponse:
        nuggets = request.nuggets
        size = 1 if self.design == "choices" else request.batch_size or self.default_batch_size()
        batches = [(k, nuggets[k : k + size]) for k in range(0, len(nuggets), size)]
        addressing = addressing_by_part(request.blocks)
        usage = Usage()
        by_markers = [self.withhold and bool(a) for a in addressing]
        shown, asserts = await self._read_blocks(request, by_markers, usage)
        # a block that addresses the judge (the markers: the second line) or asserts nothing
        # (every unit withheld or not a claim) is judged by no one: not_support throughout
        unjudged = [by_markers[b] or not asserts[b] for b in range(len(request.blocks))]
        judged = [b for b in range(len(request.blocks)) if not unjudged[b]]
        jobs = [(b, k, batch) for b in judged for k, batch in batches]
        gate = asyncio.Semaphore(1 if self.gate.passes_back_to_back else self.settings.concurrency)

        async def run(b: int, batch: Sequence[str]) -> _Call:
            async with gate:
                if self.design == "choices":
                    return await self._choose(request, shown, b, batch[0], usage)
                return await self._judge(request, shown, b, batch, usage)

        started = time.perf_counter()
        with judge_metrics(TASK, request.mode, self.backend.name, usage):
            results = await gather_or_cancel(run(b, batch) for b, _, batch in jobs)
        elapsed = time.perf_counter() - started

        blocks: list[BlockLabels] = []
        withheld: dict[Label, float] = dict.fromkeys(labels_for(request.mode), 0.0)
        withheld["not_support"] = 1.0
        for b in range(len(request.blocks)):
            labels: list[Label] = []
            probs: list[dict[Label, float] | None] = []
            if unjudged[b]:
                labels = ["not_support"] * len(nuggets)
                probs = [dict(withheld) for _ in nuggets]
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
            "nuggets.labelled blocks=%d withheld=%d nuggets=%d calls=%d seconds=%.2f",
            len(request.blocks),
            len(request.blocks) - len(judged),
            len(nuggets),
            usage.calls,
            elapsed,
        )
        return NuggetLabelsResponse(
            batch_size=size,
            blocks=blocks,
            repairs=sum(1 for call in results if call.repaired),
            formats=[call.parsed.format for call in results],
            design=self.design,
            calibration=self._calibration_for(request.mode),
            judge_addressing=addressing,
            **self.served(usage),
        )

    def _calibration_for(self, mode: NuggetMode) -> str | None:
        return self.calibration.model if self.calibration and mode == "long" else None

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

    async def _read_blocks(
        self, request: NuggetLabelsRequest, withheld: Sequence[bool], usage: Usage
    ) -> tuple[list[str], list[bool]]:
        """Each block as the judge is shown it and whether it asserts anything: read as
        assertion units (`llm.assertions`), its non-assertions replaced by notes without
        their content (a hedged or denied list of the facts supports nothing), or as written
        when the reading is off."""
        if not self.units.on:
            return list(request.blocks), [True] * len(request.blocks)
        shown, asserts = [], []
        for block, skip in zip(request.blocks, withheld, strict=True):
            if skip:  # withheld whole by the markers: never shown, not read
                shown.append("")
                asserts.append(False)
                continue
            reading = await self.units.read(block, question=request.question, usage=usage)
            shown.append(shown_text(reading))
            asserts.append(reading.has_assertion)
        return shown, asserts

    def _messages(
        self, request: NuggetLabelsRequest, shown: Sequence[str], b: int, nuggets: Sequence[str]
    ) -> list[Message]:
        s = self.settings
        return nugget_labels.build_messages(
            question=request.question,
            block=shown[b],
            block_index=b,
            n_blocks=len(request.blocks),
            nuggets=nuggets,
            mode=request.mode,
            fmt=s.output_format,
            reasoning=s.reasoning,
            max_block_chars=s.max_block_chars,
            examples=s.examples,
        )

    async def _choose(
        self,
        request: NuggetLabelsRequest,
        shown: Sequence[str],
        b: int,
        nugget: str,
        usage: Usage,
    ) -> _Call:
        """The choices design: p(label) from one forward pass, then the calibrated label."""
        allowed = labels_for(request.mode)
        messages = self._messages(request, shown, b, [nugget])  # json, no reasoning
        scores = await scored_choices(
            self.backend,
            messages,
            reply_prefix=REPLY_PREFIX,
            choices=allowed,
            task=TASK,
            usage=usage,
            **self.retry,
        )
        top = max(scores.logprobs.values())
        weights = {lab: math.exp(scores.logprobs[lab] - top) for lab in allowed}
        total = math.fsum(weights.values())
        probabilities: dict[Label, float] = {lab: w / total for lab, w in weights.items()}
        calibration = self.calibration if request.mode == "long" else None
        if calibration is not None:
            probabilities = calibration.probabilities(probabilities, overlap(nugget, shown[b]))
        label = max(allowed, key=lambda lab: probabilities[lab])
        parsed = ParsedLabels(labels=[label], spans=[(0, 0)], format="choices")
        return _Call(parsed=parsed, probabilities=[probabilities], repaired=False)

    async def _judge(
        self,
        request: NuggetLabelsRequest,
        shown: Sequence[str],
        b: int,
        batch: Sequence[str],
        usage: Usage,
    ) -> _Call:
        """The generate design: the model writes the labels; one repair call quotes the
        problem with a reply that has none, or the wrong number."""
        s = self.settings
        allowed = labels_for(request.mode)
        params = self._params(n=len(batch), mode=request.mode, logprobs=request.label_probabilities)

        async def call(messages: Sequence[Message]) -> Completion:
            ensure_time_left(TASK)
            return await complete(
                self.backend, messages, params, task=TASK, usage=usage, **self.retry
            )

        def accept(completion: Completion, repair: bool) -> _Call:
            try:
                parsed = parse_labels(completion.text, expected=len(batch), allowed=allowed)
            except LabelParseError as exc:
                raise Rejected(str(exc)) from exc
            probabilities = None
            if completion.logprobs is not None:
                probabilities = label_distributions(
                    completion.text, parsed.spans, completion.logprobs, allowed=allowed
                )
            return _Call(parsed=parsed, probabilities=probabilities, repaired=repair)

        return await repaired(
            call,
            self._messages(request, shown, b, batch),
            accept=accept,
            repair=lambda reason: nugget_labels.repair_message(
                reason=reason, fmt=s.output_format, n=len(batch), mode=request.mode
            ),
            task=TASK,
            backend=self.backend.name,
            usage=usage,
            failure=f"{TASK}: block {b + 1}: invalid labels",
        )
