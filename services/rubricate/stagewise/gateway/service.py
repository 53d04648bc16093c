"""Orchestration of `/v1/stagewise/score` (RubricEM §3.3, App. C).

1. parse stages (core); 2. read the question's buffer (store); 3. store persistent rubrics;
4. one rubric-generation call for the group (rubric-generator), added to the buffer;
5. one scoring call per rollout (verifier), with an answer-only fallback call;
6. scores, returns, advantages (core); 7. prune by variance over the caps (store).
A failed generation means no new rubrics; a failed scoring call falls back to the
answer-stage score, flagged; a rollout that cannot be scored at all is reported unscored.
Nothing left without a judgment becomes a number (docs/gateway.md, "Failures are never
rewards"): a group with no rubric at all is an error (502 when generation failed), a stage
with no rubric is null, and a 2xx carries the stored `scoring_id` or `scoring_not_stored`.
"""

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Literal, Protocol

from rubricate.common.errors import ServiceError
from rubricate.common.metrics import FALLBACKS
from rubricate.common.tenancy import TENANT_HEADER
from rubricate.common.request_context import WaitClock
from rubricate.common.upstream import ServiceClient, UpstreamError, Upstreams
from rubricate.common.usage import Usage, usage_out
from rubricate.core.normalize import question_hash
from rubricate.core.rubrics import make_rubric
from rubricate.stagewise.domain.scoring import RolloutJudgments, score_group
from rubricate.stagewise.domain.ssgrpo import default_lambda, validate_lambda
from rubricate.stagewise.domain.stages import StageSpans, parse_stages
from rubricate.stagewise.generator.schemas import (
    StageRubricsRequest,
    StageRubricsResponse,
    StageTexts,
)
from rubricate.stagewise.store.schemas import (
    AddRubricsRequest,
    PruneRequest,
    PruneResponse,
    ScoringIn,
)
from rubricate.stagewise.verifier.schemas import StageScoresRequest, StageScoresResponse
from rubricate_client.constants import ACTIVE_CAPS, STAGES
from rubricate_client.errors import DomainError
from rubricate_client.schemas.buffers import BufferView
from rubricate_client.schemas.rubrics import Judgment, Rubric, RubricView, Stage
from rubricate_client.schemas.scorings import ScoredRollout, StoredScoring
from rubricate_client.schemas.stagewise import (
    Fallback,
    GenerationInfo,
    RolloutResult,
    RubricOut,
    StagewiseScoreRequest,
    StagewiseScoreResponse,
    Timing,
)

log = logging.getLogger("rubricate.gateway")


class StagewiseLimits(Protocol):
    """What the stagewise orchestration reads of its service's settings (the gateway's)."""

    @property
    def max_rollouts(self) -> int: ...
    @property
    def max_trajectory_chars(self) -> int: ...
    @property
    def scoring_concurrency(self) -> int: ...


AfterScoring = Callable[[str, StagewiseScoreRequest, StagewiseScoreResponse], None]
"""(tenant, request, response) of a scored group."""


class _Outcome:
    def __init__(self) -> None:
        self.judgments: list[Judgment] = []
        self.kind: Literal["full", "answer_only", "unscored"] = "full"
        self.reason: str | None = None


def validate_request(request: StagewiseScoreRequest, settings: StagewiseLimits) -> None:
    if len(request.rollouts) > settings.max_rollouts:
        raise DomainError(
            f"at most {settings.max_rollouts} rollouts per group, got {len(request.rollouts)}",
            field="rollouts",
        )
    seen: set[str] = set()
    for i, rollout in enumerate(request.rollouts):
        if rollout.id in seen:
            raise DomainError(f"duplicate rollout id {rollout.id!r}", field=f"rollouts[{i}].id")
        seen.add(rollout.id)
        if len(rollout.trajectory) > settings.max_trajectory_chars:
            raise DomainError(
                f"trajectory longer than {settings.max_trajectory_chars} characters",
                field=f"rollouts[{i}].trajectory",
            )
    if request.lambda_ is not None:
        validate_lambda(request.lambda_, field="lambda")


class StagewiseService:
    def __init__(
        self,
        *,
        upstreams: Upstreams,
        settings: StagewiseLimits,
        after_scoring: AfterScoring | None = None,
    ) -> None:
        self.up = upstreams
        self.settings = settings
        self.after_scoring = after_scoring
        """Called with every scored group just before its response is returned (the audit's
        hand-over, `rubricate.audit.gateway.service.AuditSubmitter`); it must not block."""

    async def score(self, request: StagewiseScoreRequest, *, tenant: str) -> StagewiseScoreResponse:
        started = time.perf_counter()
        validate_request(request, self.settings)
        lam = default_lambda() if request.lambda_ is None else validate_lambda(request.lambda_)
        qid = request.question_id or question_hash(request.question)
        headers = {TENANT_HEADER: tenant}
        clock = WaitClock()
        usage = Usage()
        parsed = [parse_stages(r.trajectory) for r in request.rollouts]
        texts: list[dict[Stage, str | None]] = [
            {s: spans.text(r.trajectory, s) for s in STAGES}
            for r, spans in zip(request.rollouts, parsed, strict=True)
        ]

        buffer = await self._buffer(qid, headers=headers, clock=clock)
        to_add = [
            make_rubric(stage="answer", spec=spec, origin="persistent", step=request.step)
            for spec in request.persistent_rubrics
        ]
        generation = GenerationInfo(status="skipped")
        generated: list[Rubric] = []
        if request.evolve:
            generation, generated = await self._generate(
                request, texts, buffer=buffer, clock=clock, usage=usage
            )
        known = {r.id for r in _flatten(buffer)}
        if to_add or generated:
            buffer = await self._add(
                qid, request, [*to_add, *generated], headers=headers, clock=clock
            )
        rubrics = _flatten(buffer)
        present = {r.id for r in rubrics}
        generation.new_rubric_ids = [
            r.id for r in generated if r.id in present and r.id not in known
        ]

        if not rubrics:
            raise _no_rubrics(request, generation, usage=usage)

        outcomes = await self._score_all(request, parsed, texts, rubrics, clock=clock, usage=usage)
        if all(o.kind == "unscored" for o in outcomes):
            raise ServiceError(
                502,
                "no rollout could be scored: " + (outcomes[0].reason or "unknown error"),
                type="judge_unavailable",
                usage=usage_out(usage),
            )
        group = score_group(
            rubrics,
            [
                RolloutJudgments(
                    missing=spans.missing,
                    judgments=o.judgments,
                    outcome="failed" if o.kind == "unscored" else o.kind,
                )
                for spans, o in zip(parsed, outcomes, strict=True)
            ],
            lam=lam,
            mode=request.mode,
            missing_stage_score=request.missing_stage_score,
        )

        if group.unscored_stages:
            FALLBACKS.labels("stage_unscored").inc(len(group.unscored_stages))
        pruned: list[str] = []
        if request.evolve and group.variances:
            caps = {**ACTIVE_CAPS, **(request.caps or {})}
            prune = await self.up.store.request(
                "POST",
                f"/v1/buffers/{qid}/prune",
                json=PruneRequest(
                    variances=group.variances, caps=caps, step=request.step
                ).model_dump(mode="json"),
                response_model=PruneResponse,
                headers=headers,
                clock=clock,
            )
            pruned = prune.pruned

        results = [
            RolloutResult(
                id=rollout.id,
                spans=spans.spans,
                missing_stages=spans.missing,
                scores=rs.scores,
                returns=rs.returns,
                advantages=rs.advantages,
                judgments=o.judgments,
                fallback=None if o.kind == "full" else Fallback(kind=o.kind, reason=o.reason or ""),
            )
            for rollout, spans, o, rs in zip(
                request.rollouts, parsed, outcomes, group.rollouts, strict=True
            )
        ]
        rubric_set = {s: [_out(r) for r in rubrics if r.stage == s] for s in STAGES}
        scoring_id, not_stored = await keep_scoring(
            self.up.store,
            tenant=tenant,
            question_id=qid,
            request=request,
            rubrics=rubric_set,
            results=results,
            clock=clock,
        )
        total = time.perf_counter() - started
        upstream = clock.total()
        log.info(
            "stagewise.scored question_id=%s rollouts=%d new=%d pruned=%d seconds=%.2f",
            qid,
            len(results),
            len(generation.new_rubric_ids),
            len(pruned),
            total,
        )
        response = StagewiseScoreResponse(
            question_id=qid,
            scoring_id=scoring_id,
            scoring_not_stored=not_stored,
            mode=request.mode,
            lambda_=lam,
            rollouts=results,
            rubrics=rubric_set,
            pruned=pruned,
            generation=generation,
            unscored_stages=group.unscored_stages,
            usage=usage_out(usage),
            timing=Timing(
                total_s=total, upstream_s=upstream, overhead_s=max(0.0, total - upstream)
            ),
        )
        if self.after_scoring is not None:
            self.after_scoring(tenant, request, response)
        return response

    async def _buffer(self, qid: str, *, headers: dict[str, str], clock: WaitClock) -> BufferView:
        try:
            return await self.up.store.request(
                "GET", f"/v1/buffers/{qid}", response_model=BufferView, headers=headers, clock=clock
            )
        except UpstreamError as exc:
            if exc.status == 404:
                return BufferView.empty(qid)
            raise

    async def _add(
        self,
        qid: str,
        request: StagewiseScoreRequest,
        rubrics: Sequence[Rubric],
        *,
        headers: dict[str, str],
        clock: WaitClock,
    ) -> BufferView:
        body = AddRubricsRequest(
            question=request.question, rubrics=list(rubrics), step=request.step
        )
        return await self.up.store.request(
            "POST",
            f"/v1/buffers/{qid}/rubrics",
            json=body.model_dump(mode="json"),
            response_model=BufferView,
            headers=headers,
            clock=clock,
        )

    async def _generate(
        self,
        request: StagewiseScoreRequest,
        texts: Sequence[dict[Stage, str | None]],
        *,
        buffer: BufferView,
        clock: WaitClock,
        usage: Usage,
    ) -> tuple[GenerationInfo, list[Rubric]]:
        body = StageRubricsRequest(
            question=request.question,
            trajectories=[
                StageTexts(id=r.id, stages=t) for r, t in zip(request.rollouts, texts, strict=True)
            ],
            existing=_flatten(buffer),
        )
        try:
            out = await self.up.generator.task(
                "/v1/tasks/stage-rubrics",
                body,
                response_model=StageRubricsResponse,
                clock=clock,
                usage=usage,
            )
        except UpstreamError as exc:
            FALLBACKS.labels("no_new_rubrics").inc()
            log.warning("stagewise.generation_failed error=%s", exc)
            return GenerationInfo(status="failed", error=str(exc)), []
        generated = [
            make_rubric(stage=stage, spec=spec, origin="active", step=request.step)
            for stage in STAGES
            for spec in out.rubrics.get(stage, [])
        ]
        return GenerationInfo(status="ok"), generated

    async def _score_all(
        self,
        request: StagewiseScoreRequest,
        parsed: Sequence[StageSpans],
        texts: Sequence[dict[Stage, str | None]],
        rubrics: Sequence[Rubric],
        *,
        clock: WaitClock,
        usage: Usage,
    ) -> list[_Outcome]:
        gate = asyncio.Semaphore(self.settings.scoring_concurrency)

        async def one(spans: StageSpans, stage_texts: dict[Stage, str | None]) -> _Outcome:
            async with gate:
                return await self._score_one(
                    request.question, spans, stage_texts, rubrics, clock=clock, usage=usage
                )

        return list(await asyncio.gather(*(one(p, t) for p, t in zip(parsed, texts, strict=True))))

    async def _score_one(
        self,
        question: str,
        spans: StageSpans,
        stage_texts: dict[Stage, str | None],
        rubrics: Sequence[Rubric],
        *,
        clock: WaitClock,
        usage: Usage,
    ) -> _Outcome:
        outcome = _Outcome()
        judged = [r for r in rubrics if r.stage not in spans.missing]
        if not judged:
            return outcome
        try:
            outcome.judgments = await self._verify(question, stage_texts, judged, clock, usage)
            return outcome
        except UpstreamError as exc:
            first_error = str(exc)
        answers = [r for r in judged if r.stage == "answer"]
        if not answers or len(answers) == len(judged):
            FALLBACKS.labels("unscored").inc()
            outcome.kind, outcome.reason = "unscored", first_error
            return outcome
        try:
            outcome.judgments = await self._verify(question, stage_texts, answers, clock, usage)
        except UpstreamError as exc:
            FALLBACKS.labels("unscored").inc()
            outcome.kind = "unscored"
            outcome.reason = f"stagewise scoring failed ({first_error}); answer-only too ({exc})"
            return outcome
        FALLBACKS.labels("answer_only").inc()
        outcome.kind = "answer_only"
        outcome.reason = f"stagewise scoring failed: {first_error}"
        return outcome

    async def _verify(
        self,
        question: str,
        stage_texts: dict[Stage, str | None],
        rubrics: Sequence[Rubric],
        clock: WaitClock,
        usage: Usage,
    ) -> list[Judgment]:
        body = StageScoresRequest(question=question, stages=stage_texts, rubrics=list(rubrics))
        out = await self.up.verifier.task(
            "/v1/tasks/stage-scores",
            body,
            response_model=StageScoresResponse,
            clock=clock,
            usage=usage,
        )
        return out.judgments


def _no_rubrics(
    request: StagewiseScoreRequest, generation: GenerationInfo, *, usage: Usage
) -> ServiceError:
    """The error for a group with no rubric to judge it on: every stage would be left without
    a judgment, so there is no score to give (never a group of zeros)."""
    FALLBACKS.labels("no_rubrics").inc()
    if generation.status == "failed":
        return ServiceError(
            502,
            "the question has no rubrics yet and rubric generation failed: "
            + (generation.error or "unknown error"),
            type="judge_unavailable",
            usage=usage_out(usage),
        )
    if generation.status == "ok":
        return ServiceError(
            502,
            "the question has no rubrics yet and the judge proposed none",
            type="judge_unavailable",
            usage=usage_out(usage),
        )
    return ServiceError(
        409,
        "the question has no rubrics: send persistent_rubrics or set evolve to generate them",
        type="no_rubrics",
        field="evolve" if not request.evolve else None,
        usage=usage_out(usage),
    )


def _flatten(buffer: BufferView) -> list[Rubric]:
    return [r for s in STAGES for r in buffer.rubrics.get(s, [])]


def _out(rubric: Rubric) -> RubricOut:
    return RubricOut(
        id=rubric.id,
        stage=rubric.stage,
        title=rubric.title,
        description=rubric.description,
        weight=rubric.weight,
        polarity=rubric.polarity,
        origin=rubric.origin,
    )


# --- keeping stagewise scorings for reference by id ---------------------------------------


def new_scoring_id() -> str:
    return "sc_" + uuid.uuid4().hex


async def keep_scoring(
    store: ServiceClient,
    *,
    tenant: str,
    question_id: str,
    request: StagewiseScoreRequest,
    rubrics: dict[Stage, list[RubricOut]],
    results: Sequence[RolloutResult],
    clock: WaitClock | None = None,
    attempts: int = 2,
) -> tuple[str | None, str | None]:
    """Store what a stagewise scoring judged: (its id, None), or (None, why) when the store
    could not keep it after `attempts` tries (the scoring itself stands; the trainer then
    sends the judgments inline). The id is chosen here, so a retried write that did land the
    first time is answered as a duplicate of the same record, not a second one."""
    scoring_id = new_scoring_id()
    body = ScoringIn(
        scoring_id=scoring_id,
        question_id=question_id,
        question=request.question,
        step=request.step,
        rubrics=[
            RubricView(
                id=r.id,
                stage=r.stage,
                title=r.title,
                description=r.description,
                weight=r.weight,
                polarity=r.polarity,
            )
            for stage_rubrics in rubrics.values()
            for r in stage_rubrics
        ],
        rollouts={
            r.id: ScoredRollout(
                scores=r.scores,
                judgments=r.judgments,
                fallback=None if r.fallback is None else r.fallback.kind,
            )
            for r in results
        },
    )
    error: UpstreamError | None = None
    for attempt in range(1, max(1, attempts) + 1):
        try:
            await store.request(
                "POST",
                "/v1/scorings",
                json=body.model_dump(mode="json"),
                response_model=StoredScoring,
                headers={TENANT_HEADER: tenant},
                clock=clock,
            )
        except UpstreamError as exc:
            if exc.status == 409 and attempt > 1:
                return scoring_id, None  # the first try landed after all
            error = exc
            if exc.status is not None and 400 <= exc.status < 500 and exc.status != 429:
                break  # the store refused this record: asking again gets the same answer
            log.warning(
                "stagewise.scoring_not_kept question_id=%s attempt=%d error=%s",
                question_id,
                attempt,
                exc,
            )
            continue
        return scoring_id, None
    FALLBACKS.labels("scoring_not_stored").inc()
    reason = f"the store could not keep the scoring record: {error}"
    log.warning("stagewise.scoring_not_stored question_id=%s error=%s", question_id, error)
    return None, reason
