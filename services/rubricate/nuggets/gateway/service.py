"""Orchestration of nugget verification (Search-Gen-V §3.3, §4.4).

1. validate; 2. split the answer into blocks (core; short mode: one block);
3. short mode: normalized exact match first; 4. one verifier task call for the rest, which
labels every (block, nugget) pair in batches and withholds blocks that address the judge;
5. the optional lexical prior, then the grounding check (core, `domain.grounding`): a label
stands only where its block carries the nugget's content; 6. max-pool and the reward (core).
A verifier failure is an error of the request (or of the item, in a batch), never a 0.
Blocks the verifier withheld are reported (`blocks[i].judge_addressing`, `judge_addressing`
on the response), never dropped silently (GitHub issue 25); with a tenant and the audit on,
a flagged request is handed to the audit (kind `nugget`).
"""

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from rubricate.common.addressing import AddressingReporter, hand_over
from rubricate.common.metrics import FALLBACKS
from rubricate.common.upstream import ServiceClient, UpstreamError, upstream_failure
from rubricate.common.usage import Usage, usage_out
from rubricate.nuggets.domain.grounding import (
    CALIBRATED,
    GroundingRule,
    capped,
    ground_labels,
)
from rubricate.nuggets.domain.lexical import OverlapThresholds, overlap, with_prior
from rubricate.nuggets.domain.rewards import (
    LABEL_VALUES,
    Block,
    Pooled,
    SoftPooled,
    exact_match,
    max_pool,
    reward,
    soft_max_pool,
    split_blocks,
    weights_of,
    whole_block,
)
from rubricate.nuggets.verifier.endpoints import NUGGET_LABELS
from rubricate.nuggets.verifier.schemas import NuggetLabelsRequest, NuggetLabelsResponse
from rubricate_client.errors import DomainError
from rubricate_client.schemas.audit import AddressingReport
from rubricate_client.schemas.nuggets import (
    MAX_BATCH_SIZE,
    BatchItemResult,
    BlockOut,
    DecidedBy,
    ItemError,
    JudgeInfo,
    Label,
    NuggetResult,
    NuggetVerifyBatchRequest,
    NuggetVerifyBatchResponse,
    NuggetVerifyRequest,
    NuggetVerifyResponse,
)

log = logging.getLogger("rubricate.nuggets.gateway.service")


class NuggetSettings(BaseSettings):
    """Nugget verification on the gateway (env prefix RUBRICATE_NUGGETS_)."""

    model_config = SettingsConfigDict(env_prefix="RUBRICATE_NUGGETS_", extra="ignore")

    batch_size: int | None = Field(default=None, ge=1, le=MAX_BATCH_SIZE)
    """Nuggets per verifier call when a request does not say; unset: the verifier's
    default for its backend (1 embedded, 10 served)."""
    max_nuggets: int = Field(default=100, ge=1)
    max_answer_chars: int = Field(default=100_000, ge=1)
    max_blocks: int = Field(default=16, ge=1)
    """An answer with more paragraphs has them packed into this many blocks."""
    max_batch_items: int = Field(default=256, ge=1)
    batch_concurrency: int = Field(default=8, ge=1)
    """Items of a batch request verified at once."""
    lexical_prior: Literal["off", "soften", "promote", "max"] = "off"
    """Long mode: correct each (block, nugget) label of the model with the word overlap
    (rubricate.nuggets.domain.lexical.with_prior). Measured in docs/judge-quality.md; off by
    default."""
    overlap_support: float = Field(default=0.75, ge=0.0, le=1.0)
    """Overlap at or above which the prior reads `support` (calibrated on the RAG24 dev file)."""
    overlap_partial: float = Field(default=0.6, ge=0.0, le=1.0)
    """Overlap at or above which the prior reads `partial_support`."""
    grounding: bool = True
    """Lower each (block, nugget) label whose block does not carry the nugget's content
    (`rubricate.nuggets.domain.grounding`), after the model and the prior. Off only to
    measure the model alone: without it, a block that talks about grading can lift a nugget."""
    grounding_support: float = Field(default=CALIBRATED.support_min, ge=0.0, le=1.0)
    """Share of the nugget's content words a block needs to keep `support`."""
    grounding_partial: float = Field(default=CALIBRATED.partial_min, ge=0.0, le=1.0)
    """Share a block needs to keep `partial_support` (long mode)."""
    grounding_numbers: bool = CALIBRATED.numbers
    """`support` also needs every number of the nugget in the block."""

    def grounding_rule(self) -> GroundingRule | None:
        if not self.grounding:
            return None
        return GroundingRule(
            support_min=self.grounding_support,
            partial_min=min(self.grounding_partial, self.grounding_support),
            numbers=self.grounding_numbers,
        )


Labeller = Callable[[NuggetLabelsRequest], Awaitable[NuggetLabelsResponse]]
"""A verifier's nugget-label task called in process (the evaluation harness); the gateway
itself posts to the verifier."""


def validate_request(request: NuggetVerifyRequest, settings: NuggetSettings) -> None:
    if request.mode == "short" and len(request.nuggets) != 1:
        raise DomainError(
            f"short mode takes exactly one ground-truth nugget, got {len(request.nuggets)}",
            field="nuggets",
        )
    if len(request.nuggets) > settings.max_nuggets:
        raise DomainError(
            f"at most {settings.max_nuggets} nuggets per answer, got {len(request.nuggets)}",
            field="nuggets",
        )
    if len(request.answer) > settings.max_answer_chars:
        raise DomainError(
            f"answer longer than {settings.max_answer_chars} characters", field="answer"
        )


class NuggetService:
    def __init__(
        self,
        *,
        verifier: ServiceClient | None,
        settings: NuggetSettings,
        labeller: Labeller | None = None,
        audit: AddressingReporter | None = None,
    ) -> None:
        if verifier is None and labeller is None:
            raise ValueError("a nugget service needs a verifier client or a labeller")
        self.audit = audit
        self.verifier = verifier
        self.settings = settings
        self.labeller = labeller
        self.rule = settings.grounding_rule()

    async def verify(
        self, request: NuggetVerifyRequest, *, usage: Usage, tenant: str | None = None
    ) -> NuggetVerifyResponse:
        """1. validate; 2. split the answer into blocks; 3. label every (block, nugget) pair
        (`_label`); 4. max-pool and weigh the labels; 5. with a tenant, hand a response that
        flags blocks addressing the judge to the audit (one answer: one item).

        Raises DomainError (bad input) or UpstreamError (the verifier failed); the LLM work
        spent is added to `usage` either way."""
        started = time.perf_counter()
        validate_request(request, self.settings)
        if request.mode == "short":
            blocks = whole_block(request.answer)
        else:
            blocks = split_blocks(request.answer, max_blocks=self.settings.max_blocks)
        labelled = await self._label(request, blocks, usage=usage)
        response = _response(request, blocks, labelled, usage=usage, started=started)
        log.info(
            "nuggets.verified mode=%s nuggets=%d blocks=%d withheld=%d decided_by=%s reward=%.3f",
            request.mode,
            len(request.nuggets),
            len(blocks),
            sum(1 for found in labelled.addressing if found),
            labelled.decided,
            response.reward,
        )
        if response.judge_addressing:
            report = AddressingReport(
                kind="nugget", items=1, flagged=1, markers=_block_markers(response)
            )
            hand_over(self.audit, tenant, report)
        return response

    async def _label(
        self, request: NuggetVerifyRequest, blocks: Sequence[Block], *, usage: Usage
    ) -> "_Labelled":
        """The labels per block and what decided them: no block (an empty answer), the
        normalized exact match (short mode), else the verifier's labels (`_model_labels`)."""
        if not blocks:
            return _Labelled(decided="empty_answer", addressing=[])
        if (
            request.mode == "short"
            and request.exact_match
            and exact_match(request.answer, request.nuggets[0].text)
        ):
            return _Labelled(
                decided="exact_match", labels=[["support"]], addressing=[[] for _ in blocks]
            )
        return await self._model_labels(request, blocks, usage=usage)

    async def _model_labels(
        self, request: NuggetVerifyRequest, blocks: Sequence[Block], *, usage: Usage
    ) -> "_Labelled":
        """One verifier task call for every (block, nugget) pair; then the lexical prior
        (long mode, when on) and the grounding check correct its labels, and the label
        distributions (when asked) are capped by them."""
        batch_size = request.batch_size or self.settings.batch_size
        out = await self._labels(request, blocks, batch_size=batch_size, usage=usage)
        labels = [list(b.labels) for b in out.blocks]
        if request.mode == "long" and self.settings.lexical_prior != "off":
            labels = self._with_prior(request, blocks, labels)
        if self.rule is not None:
            labels = ground_labels(
                labels,
                [b.text for b in blocks],
                [nugget.text for nugget in request.nuggets],
                mode=request.mode,
                rule=self.rule,
            )
        return _Labelled(
            decided="model",
            labels=labels,
            addressing=[list(found) for found in out.judge_addressing]
            if out.judge_addressing
            else [[] for _ in blocks],
            soft=_soft_pooled(out, labels, n=len(request.nuggets))
            if request.label_probabilities
            else None,
            judge=JudgeInfo(
                model=out.model,
                backend=out.backend,
                repairs=out.repairs,
                lexical_prior=None if request.mode == "short" else self.settings.lexical_prior,
                design=out.design,
                calibration=out.calibration,
            ),
            batch_size=out.batch_size,
        )

    def _with_prior(
        self,
        request: NuggetVerifyRequest,
        blocks: Sequence[Block],
        labels_by_block: Sequence[Sequence[Label]],
    ) -> list[list[Label]]:
        rule = self.settings.lexical_prior
        assert rule != "off"
        th = OverlapThresholds(
            support=self.settings.overlap_support, partial=self.settings.overlap_partial
        )
        return [
            [
                with_prior(label, overlap(nugget.text, block.text), th, rule=rule)
                for nugget, label in zip(request.nuggets, labels, strict=True)
            ]
            for block, labels in zip(blocks, labels_by_block, strict=True)
        ]

    async def verify_batch(
        self, request: NuggetVerifyBatchRequest, tenant: str | None = None
    ) -> NuggetVerifyBatchResponse:
        """With a tenant, a batch in which some answer addressed the judge is handed to the
        audit as one report (items: the batch's answers)."""
        started = time.perf_counter()
        if len(request.items) > self.settings.max_batch_items:
            raise DomainError(
                f"at most {self.settings.max_batch_items} items per batch, "
                f"got {len(request.items)}",
                field="items",
            )
        limit = min(
            request.concurrency or self.settings.batch_concurrency, self.settings.batch_concurrency
        )
        gate = asyncio.Semaphore(limit)
        usage = Usage()

        async def one(index: int, item: NuggetVerifyRequest) -> BatchItemResult:
            item_usage = Usage()
            async with gate:
                try:
                    result = await self.verify(item, usage=item_usage)
                except DomainError as exc:
                    field = f"items[{index}]" + (f".{exc.field}" if exc.field else "")
                    error = ItemError(
                        type="validation_error", message=exc.message, field=field, status=422
                    )
                    return BatchItemResult(index=index, error=error)
                except UpstreamError as exc:
                    FALLBACKS.labels("nugget_unscored").inc()
                    failure = upstream_failure(exc)
                    error = ItemError(
                        type=failure.type, message=failure.message, status=failure.status_code
                    )
                    return BatchItemResult(index=index, error=error)
                finally:
                    usage.merge(item_usage)
            return BatchItemResult(index=index, result=result)

        items = list(await asyncio.gather(*(one(i, it) for i, it in enumerate(request.items))))
        failed = sum(1 for item in items if item.error is not None)
        log.info("nuggets.batch items=%d failed=%d", len(items), failed)
        flagged = [i for i in items if i.result is not None and i.result.judge_addressing]
        if flagged:
            hand_over(
                self.audit,
                tenant,
                AddressingReport(
                    kind="nugget",
                    items=len(items),
                    flagged=len(flagged),
                    markers=[
                        f"item {i.index}: {m}"
                        for i in flagged
                        if i.result is not None
                        for m in _block_markers(i.result)
                    ],
                ),
            )
        return NuggetVerifyBatchResponse(
            rewards=[None if item.result is None else item.result.reward for item in items],
            items=items,
            succeeded=len(items) - failed,
            failed=failed,
            usage=usage_out(usage),
            total_s=time.perf_counter() - started,
        )

    async def _labels(
        self,
        request: NuggetVerifyRequest,
        blocks: Sequence[Block],
        *,
        batch_size: int | None,
        usage: Usage,
    ) -> NuggetLabelsResponse:
        body = NuggetLabelsRequest(
            question=request.question,
            blocks=[b.text for b in blocks],
            nuggets=[nugget.text for nugget in request.nuggets],
            mode=request.mode,
            batch_size=batch_size,
            label_probabilities=request.label_probabilities,
        )
        try:
            if self.labeller is not None:
                out = await self.labeller(body)
            else:
                assert self.verifier is not None
                out = await self.verifier.call(NUGGET_LABELS, body)
        except UpstreamError as exc:
            if exc.usage is not None:
                usage.merge(exc.usage)
            raise
        usage.merge(out.usage)
        if (
            len(out.blocks) != len(blocks)
            or any(len(b.labels) != len(request.nuggets) for b in out.blocks)
            or (out.judge_addressing and len(out.judge_addressing) != len(blocks))
        ):
            raise UpstreamError(
                service="verifier",
                status=200,
                type="upstream_invalid_response",
                message="the verifier returned labels that do not match the blocks and nuggets",
                usage=out.usage,
            )
        return out


@dataclass
class _Labelled:
    """An answer's labels per block and what decided them; with the model, what each block
    holds that addresses the judge, the label distributions pooled, the judge and the batch
    size it used."""

    decided: DecidedBy
    addressing: list[list[str]]
    labels: list[list[Label]] = field(default_factory=list)
    soft: list[SoftPooled | None] | None = None
    judge: JudgeInfo | None = None
    batch_size: int | None = None


def _soft_pooled(
    out: NuggetLabelsResponse, labels: Sequence[Sequence[Label]], *, n: int
) -> list[SoftPooled | None]:
    """Each nugget's label distribution, max-pooled over the blocks, every block's capped by
    its final label (`capped`)."""
    distributions = [
        [
            None if dist is None else capped(dist, label)
            for dist, label in zip(b.probabilities or [None] * n, labels[i], strict=True)
        ]
        for i, b in enumerate(out.blocks)
    ]
    return soft_max_pool(distributions, n_nuggets=n)


def _response(
    request: NuggetVerifyRequest,
    blocks: Sequence[Block],
    labelled: _Labelled,
    *,
    usage: Usage,
    started: float,
) -> NuggetVerifyResponse:
    """The answer's reward: each nugget's label max-pooled over the blocks, weighted by
    importance (and the soft reward from the distributions, when asked)."""
    n = len(request.nuggets)
    pooled = max_pool(labelled.labels, n_nuggets=n)
    weights = weights_of([nugget.importance for nugget in request.nuggets])
    soft = labelled.soft
    results = [
        _result(j, request, p, weights[j], labelled.decided, None if soft is None else soft[j])
        for j, p in enumerate(pooled)
    ]
    return NuggetVerifyResponse(
        reward=reward([r.value for r in results], weights),
        soft_reward=_soft_reward(results, weights) if request.label_probabilities else None,
        mode=request.mode,
        batch_size=labelled.batch_size,
        nuggets=results,
        blocks=[
            BlockOut(
                index=b.index,
                start=b.start,
                end=b.end,
                labels=labels,
                judge_addressing=labelled.addressing[b.index],
            )
            for b, labels in zip(blocks, labelled.labels, strict=False)
        ],
        judge_addressing=any(labelled.addressing),
        judge=labelled.judge,
        usage=usage_out(usage),
        total_s=time.perf_counter() - started,
    )


def _result(
    j: int,
    request: NuggetVerifyRequest,
    pooled: Pooled,
    weight: float,
    decided: DecidedBy,
    soft: SoftPooled | None,
) -> NuggetResult:
    nugget = request.nuggets[j]
    return NuggetResult(
        index=j,
        text=nugget.text,
        importance=nugget.importance,
        weight=weight,
        label=pooled.label,
        value=LABEL_VALUES[pooled.label],
        block=pooled.block,
        decided_by=decided,
        probabilities=None if soft is None else soft.probabilities,
        expected_value=None if soft is None else soft.expected_value,
    )


def _soft_reward(results: Sequence[NuggetResult], weights: Sequence[float]) -> float | None:
    """Σ w·E[v] / Σ w. Nuggets decided without the model (exact match, empty answer) count
    with their hard value; a model-judged nugget without a distribution makes it null."""
    values: list[float] = []
    for r in results:
        if r.decided_by != "model":
            values.append(r.value)
        elif r.expected_value is None:
            return None
        else:
            values.append(r.expected_value)
    return reward(values, weights)


def _block_markers(response: NuggetVerifyResponse) -> list[str]:
    """What the answer's blocks hold that addresses the judge, prefixed with the block."""
    return [f"block {b.index}: {m}" for b in response.blocks for m in b.judge_addressing]
