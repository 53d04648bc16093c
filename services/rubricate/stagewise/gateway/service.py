"""Orchestration of `/v1/stagewise/score` (RubricEM §3.3, App. C), in the order
`StagewiseService.score` runs it:

1. parse the rollouts' stages (core);
2. read the question's buffer (store, `BUFFER`);
3. if the request evolves the buffer, one rubric-generation call for the group
   (rubric generator, `STAGE_RUBRICS`);
4. add the persistent and the new rubrics to the buffer (store, `BUFFER_ADD_RUBRICS`);
5. one scoring call per group (verifier, `GROUP_STAGE_SCORES`); a rollout it could not judge
   is judged alone, with an answer-only fallback call (`STAGE_SCORES`);
6. scores, returns, advantages (core);
7. prune by variance over the caps (store, `BUFFER_PRUNE`);
8. keep the scoring for reference by id (store, `SCORING_PUT`) and respond.

Every upstream call of a scoring is made inside one `request_context`, opened by `score`: it
carries the tenant header, and its clock and usage are the response's `timing` and `usage`.
A failed generation means no new rubrics; a failed scoring call falls back to the
answer-stage score, flagged; a rollout that cannot be scored at all is reported unscored.
Nothing left without a judgment becomes a number (docs/gateway.md, "Failures are never
rewards"): a group with no rubric at all is an error (502 when generation failed), a stage
with no rubric is null, and a 2xx carries the stored `scoring_id` or `scoring_not_stored`.

A model server that could not be reached (`common.upstream.unreachable`: its process
restarting, its pod replaced, after the upstream client's retries and connect hold) is not a
judgment that failed: a scoring that needed it (no rubrics and the generator unreachable, or
any rollout left unjudged because the verifier was) fails as a whole with a retryable 503
`upstream_unreachable`, so that the caller's retry scores the group (docs/gateway.md,
"Failure model").
"""

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from rubricate.common.errors import ServiceError
from rubricate.common.metrics import FALLBACKS, REFUSED_CREDIT, REFUSED_VERDICTS
from rubricate.common.request_context import request_context
from rubricate.common.tenancy import TENANT_HEADER
from rubricate.common.upstream import ServiceClient, UpstreamError, Upstreams, unreachable
from rubricate.common.usage import Usage, usage_out
from rubricate.core.normalize import question_hash
from rubricate.core.rubrics import make_rubric
from rubricate.stagewise.domain.scoring import (
    GroupScores,
    RolloutJudgments,
    refused_credit,
    score_group,
)
from rubricate.stagewise.domain.ssgrpo import default_lambda, validate_lambda
from rubricate.stagewise.domain.stages import StageSpans, parse_stages
from rubricate.stagewise.generator.endpoints import STAGE_RUBRICS
from rubricate.stagewise.generator.schemas import StageRubricsRequest, StageTexts
from rubricate.stagewise.store.endpoints import (
    BUFFER,
    BUFFER_ADD_RUBRICS,
    BUFFER_PRUNE,
    SCORING_PUT,
)
from rubricate.stagewise.store.schemas import AddRubricsRequest, PruneRequest, ScoringIn
from rubricate.stagewise.verifier.endpoints import GROUP_STAGE_SCORES, STAGE_SCORES
from rubricate.stagewise.verifier.schemas import (
    GroupStageScoresRequest,
    GroupTrajectory,
    StageScoresRequest,
)
from rubricate_client.constants import ACTIVE_CAPS, STAGES
from rubricate_client.errors import DomainError
from rubricate_client.schemas.buffers import BufferView
from rubricate_client.schemas.rubrics import Judgment, Rubric, RubricView, Stage
from rubricate_client.schemas.scorings import ScoredRollout
from rubricate_client.schemas.stagewise import (
    Fallback,
    GenerationInfo,
    Integrity,
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


StageTextMap = dict[Stage, str | None]
"""Stage -> the rollout's text of it; None where the rollout lacks the stage."""


@dataclass(frozen=True)
class _Group:
    """Step 1: the request's rollout group, parsed: its buffer key, its λ, each rollout's
    stage spans and stage texts (in rollout order)."""

    request: StagewiseScoreRequest
    question_id: str
    lam: list[list[float]]
    spans: list[StageSpans]
    texts: list[StageTextMap]

    @classmethod
    def parse(cls, request: StagewiseScoreRequest) -> "_Group":
        spans = [parse_stages(r.trajectory) for r in request.rollouts]
        return cls(
            request=request,
            question_id=request.question_id or question_hash(request.question),
            lam=default_lambda() if request.lambda_ is None else validate_lambda(request.lambda_),
            spans=spans,
            texts=[
                {s: sp.text(r.trajectory, s) for s in STAGES}
                for r, sp in zip(request.rollouts, spans, strict=True)
            ],
        )

    @property
    def buffer_key(self) -> dict[str, str]:
        """The path parameters of the question's buffer routes."""
        return {"question_id": self.question_id}


class _Outcome:
    """Step 5 for one rollout: its judgments, and whether it was scored fully, on the
    answer stage only (with why) or not at all (with why)."""

    def __init__(self) -> None:
        self.judgments: list[Judgment] = []
        self.kind: Literal["full", "answer_only", "unscored"] = "full"
        self.reason: str | None = None
        self.unreachable: UpstreamError | None = None
        """Unscored because the verifier could not be reached (not a judgment that failed)."""


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
        """The steps of the module docstring, in order; every upstream call accounts its wait
        and usage to this scoring's context and carries the tenant."""
        started = time.perf_counter()
        validate_request(request, self.settings)
        group = _Group.parse(request)  # 1
        with request_context(headers={TENANT_HEADER: tenant}) as ctx:
            buffer = await self._read_buffer(group)  # 2
            generation, generated, gen_error = await self._generate(group, buffer)  # 3
            rubrics = await self._add_rubrics(group, buffer, generated, generation)  # 4
            if not rubrics:
                if gen_error is not None and unreachable(gen_error):
                    raise _unreachable(gen_error, usage=ctx.usage)
                raise _no_rubrics(request, generation, usage=ctx.usage)
            outcomes = await self._judge_all(group, rubrics)  # 5
            lost = next((o.unreachable for o in outcomes if o.unreachable is not None), None)
            if lost is not None:  # not judged: the whole group again, on the caller's retry
                raise _unreachable(lost, usage=ctx.usage)
            scores = _score(group, rubrics, outcomes, usage=ctx.usage)  # 6
            pruned = await self._prune(group, scores)  # 7
            results = _results(group, rubrics, outcomes, scores)  # 8
            rubric_set = {s: [_out(r) for r in rubrics if r.stage == s] for s in STAGES}
            scoring_id, not_stored = await keep_scoring(
                self.up.store,
                tenant=tenant,
                question_id=group.question_id,
                request=request,
                rubrics=rubric_set,
                results=results,
            )
        total = time.perf_counter() - started
        upstream = ctx.clock.total()
        response = StagewiseScoreResponse(
            question_id=group.question_id,
            scoring_id=scoring_id,
            scoring_not_stored=not_stored,
            mode=request.mode,
            lambda_=group.lam,
            rollouts=results,
            rubrics=rubric_set,
            pruned=pruned,
            generation=generation,
            unscored_stages=scores.unscored_stages,
            usage=usage_out(ctx.usage),
            timing=Timing(
                total_s=total, upstream_s=upstream, overhead_s=max(0.0, total - upstream)
            ),
        )
        _log_scored(response, seconds=total)
        if self.after_scoring is not None:
            self.after_scoring(tenant, request, response)
        return response

    # --- step 2 to 4: the rubrics the group is judged on ----------------------------------

    async def _read_buffer(self, group: _Group) -> BufferView:
        """Step 2: the question's buffer; empty when the store has none yet."""
        try:
            return await self.up.store.call(BUFFER, path=group.buffer_key)
        except UpstreamError as exc:
            if exc.status == 404:
                return BufferView.empty(group.question_id)
            raise

    async def _generate(
        self, group: _Group, buffer: BufferView
    ) -> tuple[GenerationInfo, list[Rubric], UpstreamError | None]:
        """Step 3: the rubrics the generator proposes for the group given the buffer (none,
        `skipped`, unless the request evolves the buffer; none, `failed`, when it fails),
        and how it failed."""
        request = group.request
        if not request.evolve:
            return GenerationInfo(status="skipped"), [], None
        # the request's persistent rubrics count as in use before the store has them, so
        # the generator does not propose them again (a first group's buffer is empty)
        existing = _flatten(buffer)
        known = {r.id for r in existing}
        existing += [r for r in _persistent(request) if r.id not in known]
        body = StageRubricsRequest(
            question=request.question,
            trajectories=[
                StageTexts(id=r.id, stages=t)
                for r, t in zip(request.rollouts, group.texts, strict=True)
            ],
            existing=existing,
        )
        try:
            out = await self.up.generator.call(STAGE_RUBRICS, body)
        except UpstreamError as exc:
            FALLBACKS.labels("no_new_rubrics").inc()
            log.warning("stagewise.generation_failed error=%s", exc)
            return GenerationInfo(status="failed", error=str(exc)), [], exc
        generated = [
            make_rubric(stage=stage, spec=spec, origin="active", step=request.step)
            for stage in STAGES
            for spec in out.rubrics.get(stage, [])
        ]
        return GenerationInfo(status="ok"), generated, None

    async def _add_rubrics(
        self,
        group: _Group,
        buffer: BufferView,
        generated: Sequence[Rubric],
        generation: GenerationInfo,
    ) -> list[Rubric]:
        """Step 4: the request's persistent rubrics and the generated ones added to the
        buffer (one store call, none when there is nothing to add); the buffer's rubrics
        after it. Sets `generation.new_rubric_ids`: the generated rubrics the buffer took."""
        request = group.request
        persistent = _persistent(request)
        known = {r.id for r in _flatten(buffer)}
        if persistent or generated:
            body = AddRubricsRequest(
                question=request.question, rubrics=[*persistent, *generated], step=request.step
            )
            buffer = await self.up.store.call(BUFFER_ADD_RUBRICS, body, path=group.buffer_key)
        rubrics = _flatten(buffer)
        present = {r.id for r in rubrics}
        generation.new_rubric_ids = [
            r.id for r in generated if r.id in present and r.id not in known
        ]
        return rubrics

    # --- step 5: judging each rollout -----------------------------------------------------

    async def _judge_all(self, group: _Group, rubrics: Sequence[Rubric]) -> list[_Outcome]:
        """Step 5: the group's rollouts judged in calls of up to `scoring_concurrency` rollouts
        (`GROUP_STAGE_SCORES`; one call for a group of 16 at the defaults), each on the
        rubrics of the stages it has; a rollout whose judgment failed, or whose call did, is
        judged alone (`_judge_one`), `scoring_concurrency` at a time."""
        outcomes = [_Outcome() for _ in group.texts]
        todo = [
            (i, [k for k, r in enumerate(rubrics) if r.stage not in spans.missing])
            for i, spans in enumerate(group.spans)
        ]
        todo = [(i, judged) for i, judged in todo if judged]  # nothing to judge: no judgments
        size = self.settings.scoring_concurrency
        alone: list[tuple[int, list[Rubric], UpstreamError | None]] = []
        for start in range(0, len(todo), size):
            chunk = todo[start : start + size]
            results = await self._judge_group_call(group, rubrics, chunk)
            for (i, judged), result in zip(chunk, results, strict=True):
                if isinstance(result, list):
                    outcomes[i].judgments = result
                else:
                    alone.append((i, [rubrics[k] for k in judged], result))
        gate = asyncio.Semaphore(size)

        async def judge_alone(i: int, judged: list[Rubric], failed: UpstreamError | None) -> None:
            async with gate:
                outcomes[i] = await self._judge_one(
                    group.request.question, group.texts[i], judged, failed
                )

        await asyncio.gather(*(judge_alone(*one) for one in alone))
        return outcomes

    async def _judge_group_call(
        self, group: _Group, rubrics: Sequence[Rubric], chunk: Sequence[tuple[int, list[int]]]
    ) -> list[list[Judgment] | UpstreamError | None]:
        """One `GROUP_STAGE_SCORES` call for `chunk` (rollout index, indices of its rubrics):
        per rollout its judgments, or the failure its slot reports; None for every rollout
        when the call itself failed (a verifier without the route answers 404; an answer
        with the wrong number of outcomes counts as failed)."""
        body = GroupStageScoresRequest.model_construct(
            question=group.request.question,
            rubrics=list(rubrics),
            trajectories=[
                GroupTrajectory.model_construct(stages=group.texts[i], rubrics=judged)
                for i, judged in chunk
            ],
        )
        verifier = self.up.verifier
        try:
            out = await verifier.call(GROUP_STAGE_SCORES, body)
            if len(out.trajectories) != len(chunk):
                raise UpstreamError(
                    service=verifier.service,
                    status=None,
                    type="upstream_invalid_response",
                    message=f"{len(out.trajectories)} outcomes for {len(chunk)} rollouts",
                )
        except UpstreamError as exc:
            log.warning("stagewise.group_scoring_failed rollouts=%d error=%s", len(chunk), exc)
            # an unreachable verifier (after the client's hold) is not asked again per rollout
            return [exc if unreachable(exc) else None] * len(chunk)
        return [
            r.judgments
            if r.judgments is not None
            else UpstreamError(  # its usage is in the call's, already counted
                service=verifier.service,
                status=r.status,
                type=r.error.type if r.error else "upstream_error",
                message=r.error.message if r.error else "no judgments and no error",
            )
            for r in out.trajectories
        ]

    async def _judge_one(
        self,
        question: str,
        stage_texts: StageTextMap,
        judged: Sequence[Rubric],
        failed: UpstreamError | None = None,
    ) -> _Outcome:
        """One rollout on `judged` (the rubrics of the stages it has); when that call fails,
        on the answer rubrics alone; when that fails too (or there is nothing else),
        unscored. `failed`: how its judgment failed in a group call; the call on `judged`
        is then made again only for a failure the upstream client retries (503, 504), as it
        would have retried the rollout's own call. A verifier that could not be reached
        (`unreachable`) leaves it unscored with no further call: that is not a judgment of
        the rollout, and the scoring fails as a whole (`StagewiseService.score`)."""
        outcome = _Outcome()
        if failed is None or failed.status in self.up.verifier.retry_statuses:
            try:
                outcome.judgments = await self._verify(question, stage_texts, judged)
                return outcome
            except UpstreamError as exc:
                failed = exc
        if unreachable(failed):
            outcome.kind, outcome.reason, outcome.unreachable = "unscored", str(failed), failed
            return outcome
        first_error = str(failed)
        answers = [r for r in judged if r.stage == "answer"]
        if not answers or len(answers) == len(judged):
            FALLBACKS.labels("unscored").inc()
            outcome.kind, outcome.reason = "unscored", first_error
            return outcome
        try:
            outcome.judgments = await self._verify(question, stage_texts, answers)
        except UpstreamError as exc:
            outcome.kind = "unscored"
            outcome.reason = f"stagewise scoring failed ({first_error}); answer-only too ({exc})"
            if unreachable(exc):
                outcome.unreachable = exc
            else:
                FALLBACKS.labels("unscored").inc()
            return outcome
        FALLBACKS.labels("answer_only").inc()
        outcome.kind = "answer_only"
        outcome.reason = f"stagewise scoring failed: {first_error}"
        return outcome

    async def _verify(
        self, question: str, stage_texts: StageTextMap, rubrics: Sequence[Rubric]
    ) -> list[Judgment]:
        """The verifier's judgments of one rollout's stage texts on `rubrics`."""
        body = StageScoresRequest(question=question, stages=stage_texts, rubrics=list(rubrics))
        out = await self.up.verifier.call(STAGE_SCORES, body)
        return out.judgments

    # --- step 7: pruning ------------------------------------------------------------------

    async def _prune(self, group: _Group, scores: GroupScores) -> list[str]:
        """Step 7: the ids the store pruned from the buffer by this group's variances over
        the caps (nothing unless the request evolves the buffer)."""
        request = group.request
        if not (request.evolve and scores.variances):
            return []
        caps = {**ACTIVE_CAPS, **(request.caps or {})}
        body = PruneRequest(variances=scores.variances, caps=caps, step=request.step)
        out = await self.up.store.call(BUFFER_PRUNE, body, path=group.buffer_key)
        return out.pruned


def _score(
    group: _Group, rubrics: Sequence[Rubric], outcomes: Sequence[_Outcome], *, usage: Usage
) -> GroupScores:
    """Step 6: the group's stage scores, returns and advantages (core); a group none of whose
    rollouts could be judged is a 502 (`judge_unavailable`, with the usage spent)."""
    if all(o.kind == "unscored" for o in outcomes):
        raise ServiceError(
            502,
            "no rollout could be scored: " + (outcomes[0].reason or "unknown error"),
            type="judge_unavailable",
            usage=usage_out(usage),
        )
    request = group.request
    scores = score_group(
        rubrics,
        [
            RolloutJudgments(
                missing=spans.missing,
                judgments=o.judgments,
                outcome="failed" if o.kind == "unscored" else o.kind,
            )
            for spans, o in zip(group.spans, outcomes, strict=True)
        ],
        lam=group.lam,
        mode=request.mode,
        missing_stage_score=request.missing_stage_score,
    )
    if scores.unscored_stages:
        FALLBACKS.labels("stage_unscored").inc(len(scores.unscored_stages))
    return scores


def _results(
    group: _Group, rubrics: Sequence[Rubric], outcomes: Sequence[_Outcome], scores: GroupScores
) -> list[RolloutResult]:
    """Each rollout's part of the response: spans, scores, returns, advantages, judgments,
    the fallback it took and what its answer's reading refused (`_integrity`)."""
    return [
        RolloutResult(
            id=rollout.id,
            spans=spans.spans,
            missing_stages=spans.missing,
            scores=rs.scores,
            returns=rs.returns,
            advantages=rs.advantages,
            judgments=o.judgments,
            fallback=None if o.kind == "full" else Fallback(kind=o.kind, reason=o.reason or ""),
            integrity=_integrity(rubrics, o) if o.kind != "unscored" else None,
        )
        for rollout, spans, o, rs in zip(
            group.request.rollouts, group.spans, outcomes, scores.rollouts, strict=True
        )
    ]


def _integrity(rubrics: Sequence[Rubric], outcome: "_Outcome") -> Integrity | None:
    """What the answer's reading as assertion units refused, recorded in the metrics; None
    when nothing was."""
    count, credit = refused_credit(rubrics, outcome.judgments)
    REFUSED_CREDIT.observe(credit)
    if not count:
        return None
    REFUSED_VERDICTS.inc(count)
    return Integrity(refused_verdicts=count, refused_credit=min(1.0, credit))


def _log_scored(response: StagewiseScoreResponse, *, seconds: float) -> None:
    log.info(
        "stagewise.scored question_id=%s rollouts=%d new=%d pruned=%d seconds=%.2f",
        response.question_id,
        len(response.rollouts),
        len(response.generation.new_rubric_ids),
        len(response.pruned),
        seconds,
    )


def _unreachable(exc: UpstreamError, *, usage: Usage) -> ServiceError:
    """The error for a scoring that a model server could not be reached for (`unreachable`):
    a retryable 503 (gRPC UNAVAILABLE) with Retry-After, never a group of nulls or zeros; a
    `/get_reward` group keeps its samples and the retry scores it again, whole."""
    return ServiceError(
        503,
        f"{exc.service} could not be reached, the group was not scored (send it again): "
        f"{exc.message}",
        type="upstream_unreachable",
        headers={"Retry-After": "5"},
        usage=usage_out(usage),
    )


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


def _persistent(request: StagewiseScoreRequest) -> list[Rubric]:
    """The request's persistent rubrics (answer stage), as the buffer will hold them."""
    return [
        make_rubric(stage="answer", spec=spec, origin="persistent", step=request.step)
        for spec in request.persistent_rubrics
    ]


def _flatten(buffer: BufferView) -> list[Rubric]:
    return [r for s in STAGES for r in buffer.rubrics.get(s, [])]


def _out(rubric: Rubric) -> RubricOut:
    return RubricOut.model_validate(rubric, from_attributes=True)


# --- keeping stagewise scorings for reference by id ---------------------------------------


def new_scoring_id() -> str:
    return "sc_" + uuid.uuid4().hex


def scoring_record(
    scoring_id: str,
    *,
    question_id: str,
    request: StagewiseScoreRequest,
    rubrics: dict[Stage, list[RubricOut]],
    results: Sequence[RolloutResult],
) -> ScoringIn:
    """What the store keeps of a stagewise scoring: the rubric set and each rollout's
    scores, judgments and fallback."""
    return ScoringIn(
        scoring_id=scoring_id,
        question_id=question_id,
        question=request.question,
        step=request.step,
        rubrics=[
            RubricView.model_validate(r, from_attributes=True)
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


async def keep_scoring(
    store: ServiceClient,
    *,
    tenant: str,
    question_id: str,
    request: StagewiseScoreRequest,
    rubrics: dict[Stage, list[RubricOut]],
    results: Sequence[RolloutResult],
    attempts: int = 2,
) -> tuple[str | None, str | None]:
    """Store what a stagewise scoring judged (`SCORING_PUT`): (its id, None), or (None, why)
    when the store could not keep it after `attempts` tries (the scoring itself stands; the
    trainer then sends the judgments inline). The id is chosen here, so a retried write that
    did land the first time is answered as a duplicate of the same record, not a second one.
    The wait is accounted to the current `request_context`, if any."""
    scoring_id = new_scoring_id()
    body = scoring_record(
        scoring_id, question_id=question_id, request=request, rubrics=rubrics, results=results
    )
    error: UpstreamError | None = None
    for attempt in range(1, max(1, attempts) + 1):
        try:
            await store.request(
                SCORING_PUT.method,
                SCORING_PUT.path,
                json=body.model_dump(mode="json"),
                response_model=SCORING_PUT.response,
                headers={TENANT_HEADER: tenant},
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
