"""Orchestration of `/v1/stagewise/score` (RubricEM §3.3, App. C).

1. parse stages (core); 2. read the question's buffer (store); 3. store persistent rubrics;
4. one rubric-generation call for the group (rubric-generator), added to the buffer;
5. one scoring call per rollout (verifier), with an answer-only fallback call;
6. scores, returns, advantages (core); 7. prune by variance over the caps (store).
A failed generation means no new rubrics; a failed scoring call falls back to the
answer-stage score, flagged; a rollout that cannot be scored at all is reported unscored.
"""

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import Literal, TypeVar

from pydantic import BaseModel

from rubricate.common.errors import ServiceError
from rubricate.common.metrics import FALLBACKS
from rubricate.common.schemas import TaskResponse, UsageOut
from rubricate.common.tenancy import TENANT_HEADER
from rubricate.core.constants import ACTIVE_CAPS, STAGES
from rubricate.core.errors import DomainError
from rubricate.core.normalize import question_hash
from rubricate.core.rubrics import Judgment, Rubric, Stage, make_rubric
from rubricate.core.ssgrpo import default_lambda, validate_lambda
from rubricate.core.stages import StageSpans, parse_stages
from rubricate.core.stagewise import RolloutJudgments, score_group
from rubricate.gateway.clients import ServiceClient, UpstreamError, WaitClock
from rubricate.gateway.reflections import keep_scoring
from rubricate.gateway.schemas import (
    Fallback,
    GenerationInfo,
    RolloutResult,
    RubricOut,
    StagewiseScoreRequest,
    StagewiseScoreResponse,
    Timing,
)
from rubricate.gateway.settings import GatewaySettings
from rubricate.llm.usage import Usage
from rubricate.rubric_generator.schemas import (
    StageRubricsRequest,
    StageRubricsResponse,
    StageTexts,
)
from rubricate.store.schemas import AddRubricsRequest, BufferView, PruneRequest, PruneResponse
from rubricate.verifier.schemas import StageScoresRequest, StageScoresResponse

log = logging.getLogger("rubricate.gateway")

TaskT = TypeVar("TaskT", bound=TaskResponse)


class Upstreams:
    """The gateway's clients, one per upstream service."""

    def __init__(self, *, generator: ServiceClient, verifier: ServiceClient, store: ServiceClient):
        self.generator = generator
        self.verifier = verifier
        self.store = store

    async def aclose(self) -> None:
        for client in (self.generator, self.verifier, self.store):
            await client.aclose()


class _Outcome:
    def __init__(self) -> None:
        self.judgments: list[Judgment] = []
        self.kind: Literal["full", "answer_only", "unscored"] = "full"
        self.reason: str | None = None


def validate_request(request: StagewiseScoreRequest, settings: GatewaySettings) -> None:
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
    def __init__(self, *, upstreams: Upstreams, settings: GatewaySettings) -> None:
        self.up = upstreams
        self.settings = settings

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

        outcomes = await self._score_all(request, parsed, texts, rubrics, clock=clock, usage=usage)
        if all(o.kind == "unscored" for o in outcomes):
            raise ServiceError(
                502,
                "no rollout could be scored: " + (outcomes[0].reason or "unknown error"),
                type="judge_unavailable",
                usage=UsageOut.of(usage),
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
        scoring_id = await keep_scoring(
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
        return StagewiseScoreResponse(
            question_id=qid,
            scoring_id=scoring_id,
            mode=request.mode,
            lambda_=lam,
            rollouts=results,
            rubrics=rubric_set,
            pruned=pruned,
            generation=generation,
            unscored_stages=group.unscored_stages,
            usage=UsageOut.of(usage),
            timing=Timing(
                total_s=total, upstream_s=upstream, overhead_s=max(0.0, total - upstream)
            ),
        )

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
            out = await _run_task(
                self.up.generator,
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
        out = await _run_task(
            self.up.verifier,
            "/v1/tasks/stage-scores",
            body,
            response_model=StageScoresResponse,
            clock=clock,
            usage=usage,
        )
        return out.judgments


async def _run_task(
    client: ServiceClient,
    path: str,
    body: BaseModel,
    *,
    response_model: type[TaskT],
    clock: WaitClock,
    usage: Usage,
) -> TaskT:
    """Call a model-server task; its LLM usage is added to `usage` whether it works or not."""
    try:
        out = await client.request(
            "POST",
            path,
            json=body.model_dump(mode="json"),
            response_model=response_model,
            clock=clock,
        )
    except UpstreamError as exc:
        if exc.usage is not None:
            usage.merge(exc.usage.to_usage())
        raise
    usage.merge(out.usage.to_usage())
    return out


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
