"""Orchestration of reflection rewards and the agent rubric bank (RubricEM §3.4, App. D).

`/v1/reflections/score`: 1. the trajectory's stagewise judgments (inline, or a stored
scoring by id); 2. the two-block format check of every candidate (core); 3. one verifier
call per valid candidate, with privileged access to the judgments, retried on failure;
4. u per candidate (core); 5. the best valid candidate offered to the bank (store), unless a
candidate could not be judged. A malformed candidate gets u = 0 with its reason; a
candidate the judge failed on gets no reward and is flagged, never a silent 0. What the
verifier found addressing the judge (GitHub issue 25) is copied per candidate
(`judge_addressing`) and a flagged request is handed to the audit (kind `reflection`).
The steps run in one `request_context`: every upstream call (store and verifier, declared in
`reflections.verifier.endpoints`, `reflections.store.endpoints`,
`stagewise.store.endpoints`) carries the tenant and adds its wait to the request's clock;
the judge's LLM usage is added to its usage, the request's `usage` and `timing.upstream_s`
are read from it at the end.
"""

import asyncio
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from prometheus_client import Counter
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from rubricate.common.addressing import AddressingReporter, hand_over
from rubricate.common.errors import ServiceError
from rubricate.common.metrics import FALLBACKS
from rubricate.common.request_context import request_context
from rubricate.common.tenancy import TENANT_HEADER
from rubricate.common.upstream import ServiceClient, UpstreamError
from rubricate.common.usage import Usage, usage_out
from rubricate.core.normalize import question_hash
from rubricate.reflections.domain.bank import BankEntry, inject, render_block
from rubricate.reflections.domain.reflection import (
    DIMENSION_WEIGHTS,
    CandidateOutcome,
    FormatCheck,
    UseScores,
    bank_decision,
    best_candidate,
    check_format,
    utility,
)
from rubricate.reflections.prompts.judging import Evidence
from rubricate.reflections.store.endpoints import BANK_OFFER, BANK_RETRIEVE
from rubricate.reflections.store.schemas import BankItemIn, RetrieveRequest
from rubricate.reflections.verifier.endpoints import REFLECTION_JUDGING
from rubricate.reflections.verifier.schemas import ReflectionScoresRequest, ReflectionScoresResponse
from rubricate.stagewise.store.endpoints import SCORING
from rubricate_client.errors import DomainError
from rubricate_client.schemas.audit import AddressingReport
from rubricate_client.schemas.reflections import (
    BankRetrieveRequest,
    BankRetrieveResponse,
    BankWrite,
    CandidateResult,
    Dimension,
    ReflectionScoreRequest,
    ReflectionScoreResponse,
    StagewiseEvidence,
    UseScoresOut,
)
from rubricate_client.schemas.rubrics import Judgment, RubricView, Stage
from rubricate_client.schemas.scorings import StoredScoring
from rubricate_client.schemas.stagewise import RubricOut, Timing

log = logging.getLogger("rubricate.gateway")

REFLECTION_CANDIDATES = Counter(
    "rubricate_reflection_candidates_total",
    "Reflection candidates by outcome (scored | invalid_format | judge_failed).",
    ["status"],
)
BANK_WRITES = Counter(
    "rubricate_bank_writes_total",
    "Best reflections offered to the bank, by result (written | kept | skipped | failed).",
    ["result"],
)


class ReflectionSettings(BaseSettings):
    """Reflection-reward settings (env prefix RUBRICATE_REFLECTION_)."""

    model_config = SettingsConfigDict(env_prefix="RUBRICATE_REFLECTION_", extra="ignore")

    judge_attempts: int = Field(default=2, ge=1, le=5)
    """Verifier calls per candidate before it is reported `judge_failed` (each call already
    retries transport errors and repairs invalid output once inside the verifier)."""
    judge_concurrency: int = Field(default=8, ge=1)
    """Candidates judged at once per request."""
    accept_threshold: float = Field(default=0.0, ge=0.0, le=1.0)
    """The best candidate enters the bank only with u at least this (the paper sets none)."""


class _Judged:
    def __init__(self) -> None:
        self.result: ReflectionScoresResponse | None = None
        self.error: str | None = None


class ReflectionLimits(Protocol):
    """What reflection scoring reads of its service's settings (the gateway's)."""

    @property
    def max_trajectory_chars(self) -> int: ...


class ReflectionService:
    def __init__(
        self,
        *,
        verifier: ServiceClient,
        store: ServiceClient,
        settings: ReflectionLimits,
        reflection: ReflectionSettings,
        audit: AddressingReporter | None = None,
    ) -> None:
        self.audit = audit
        self.verifier = verifier
        self.store = store
        self.settings = settings
        self.reflection = reflection

    # --- the reflection reward (REFLECTIONS_SCORE) ----------------------------------------

    async def score(
        self, request: ReflectionScoreRequest, *, tenant: str
    ) -> ReflectionScoreResponse:
        """The steps of the module docstring, in order, in one request context."""
        started = time.perf_counter()
        self._check_size(request)
        with request_context(headers={TENANT_HEADER: tenant}) as ctx:
            stage_scores, evidence = await self._evidence(request)
            checks = [check_format(text) for text in request.candidates]
            judged = await self._judge_all(request, checks, stage_scores, evidence, ctx.usage)
            rated = _rate(checks, judged, usage=ctx.usage)
            hand_over(self.audit, tenant, rated.addressing_report(step=request.step))
            qhash = question_hash(request.question)
            bank = await self._write_bank(request, rated, qhash)
        total = time.perf_counter() - started
        upstream = ctx.clock.total()
        log.info(
            "reflection.scored question_hash=%s candidates=%d valid=%d failed=%d best=%s "
            "written=%s seconds=%.2f",
            qhash[:12],
            len(rated.results),
            rated.n_valid,
            rated.n_failed,
            rated.best,
            bank.written,
            total,
        )
        return ReflectionScoreResponse(
            question_hash=qhash,
            candidates=rated.results,
            best_index=rated.best,
            bank=bank,
            weights=dict(DIMENSION_WEIGHTS),
            usage=usage_out(ctx.usage),
            timing=Timing(
                total_s=total, upstream_s=upstream, overhead_s=max(0.0, total - upstream)
            ),
            judge_addressing=any(rated.addressing),
        )

    def _check_size(self, request: ReflectionScoreRequest) -> None:
        limit = self.settings.max_trajectory_chars
        if len(request.trajectory) > limit:
            raise DomainError(f"trajectory longer than {limit} characters", field="trajectory")

    async def _evidence(
        self, request: ReflectionScoreRequest
    ) -> tuple[dict[Stage, float] | None, list[Evidence]]:
        """Step 1: the judged stage scores and the per-rubric evidence, inline or stored."""
        if (request.judgments is None) == (request.scoring_id is None):
            raise DomainError(
                "give the trajectory's stagewise judgments either inline (`judgments`) or by "
                "reference (`scoring_id`), exactly one of them",
                field="scoring_id" if request.scoring_id is not None else "judgments",
            )
        if request.judgments is not None:
            if request.rollout_id is not None:
                raise DomainError("rollout_id goes with scoring_id", field="rollout_id")
            return _judged_stages(request.judgments.scores), inline_evidence(request.judgments)
        assert request.scoring_id is not None
        return stored_evidence(await self._stored_scoring(request.scoring_id), request)

    async def _stored_scoring(self, scoring_id: str) -> StoredScoring:
        try:
            return await self.store.call(SCORING, path={"scoring_id": scoring_id})
        except UpstreamError as exc:
            if exc.status != 404:
                raise
            raise ServiceError(
                404,
                f"no stagewise scoring {scoring_id!r} (unknown or expired)",
                type="not_found",
                field="scoring_id",
            ) from exc

    async def _judge_all(
        self,
        request: ReflectionScoreRequest,
        checks: Sequence[FormatCheck],
        stage_scores: dict[Stage, float] | None,
        evidence: list[Evidence],
        usage: Usage,
    ) -> list[_Judged]:
        """Step 3: the verifier's judgment of every valid candidate, `judge_concurrency` at
        once; the judge's LLM usage (a failed call's too) is added to `usage`."""
        gate = asyncio.Semaphore(self.reflection.judge_concurrency)

        async def one(text: str, check: FormatCheck) -> _Judged:
            if not check.valid:
                return _Judged()
            body = ReflectionScoresRequest(
                question=request.question,
                trajectory=request.trajectory,
                stage_scores=stage_scores,
                evidence=evidence,
                candidate=text,
            )
            async with gate:
                return await self._judge(body, usage)

        return list(
            await asyncio.gather(
                *(one(t, c) for t, c in zip(request.candidates, checks, strict=True))
            )
        )

    async def _judge(self, body: ReflectionScoresRequest, usage: Usage) -> _Judged:
        """Up to `judge_attempts` verifier calls; a refusal (4xx but 429) is not retried."""
        judged = _Judged()
        attempts = self.reflection.judge_attempts
        for attempt in range(1, attempts + 1):
            try:
                judged.result = await self.verifier.task(
                    REFLECTION_JUDGING.path,
                    body,
                    response_model=REFLECTION_JUDGING.response,
                    usage=usage,
                )
                judged.error = None
                return judged
            except UpstreamError as exc:
                judged.error = f"{exc.type}: {exc.message}"
                log.warning(
                    "reflection.judge_failed attempt=%d/%d error=%s",
                    attempt,
                    attempts,
                    judged.error,
                )
                if _not_retryable(exc):
                    break
        return judged

    async def _write_bank(
        self, request: ReflectionScoreRequest, rated: "_Rated", qhash: str
    ) -> BankWrite:
        """Step 5: the best valid candidate offered to the bank, when the request asks for
        it and the bank's rule lets it in; a failed write is reported, never raised."""
        decision = bank_decision(rated.outcomes, accept_threshold=self.reflection.accept_threshold)
        if not request.write_to_bank:
            return BankWrite(written=False, reason="write_to_bank is false", question_hash=qhash)
        if not decision.write or decision.index is None:
            BANK_WRITES.labels("skipped").inc()
            return BankWrite(written=False, reason=decision.reason, question_hash=qhash)
        best = decision.index
        try:
            offered = await self.store.call(BANK_OFFER, _bank_item(request, rated, best))
        except UpstreamError as exc:
            BANK_WRITES.labels("failed").inc()
            log.warning("reflection.bank_write_failed question_hash=%s error=%s", qhash[:12], exc)
            return BankWrite(
                written=False, reason=f"bank write failed: {exc.message}", question_hash=qhash
            )
        BANK_WRITES.labels("written" if offered.written else "kept").inc()
        rated.results[best].written = offered.written
        return BankWrite(
            written=offered.written,
            reason=offered.reason,
            question_hash=qhash,
            version=offered.item.version,
        )

    # --- bank retrieval (BANK_RETRIEVE) -----------------------------------------------------

    async def retrieve(self, request: BankRetrieveRequest, *, tenant: str) -> BankRetrieveResponse:
        found = await self.store.call(
            BANK_RETRIEVE,
            RetrieveRequest(question=request.question, mode=request.mode, k=request.k),
            headers={TENANT_HEADER: tenant},
        )
        entries = [
            BankEntry(question=i.question, rubrics=i.rubrics, takeaways=i.takeaways)
            for i in found.items
        ]
        block = render_block(request.mode, entries)
        return BankRetrieveResponse(
            mode=found.mode,
            question_hash=found.question_hash,
            items=found.items,
            block=block,
            prompt=inject(block, request.question),
        )


@dataclass
class _Rated:
    """Step 4: every candidate's format check, judgment, outcome (u) and result."""

    checks: list[FormatCheck]
    judged: list[_Judged]
    outcomes: list[CandidateOutcome]
    results: list[CandidateResult]

    @property
    def n_valid(self) -> int:
        return sum(1 for c in self.checks if c.valid)

    @property
    def n_failed(self) -> int:
        return sum(1 for o in self.outcomes if o.status == "judge_failed")

    @property
    def best(self) -> int | None:
        return best_candidate(self.outcomes)

    @property
    def addressing(self) -> list[list[str]]:
        """What the verifier found addressing the judge, per candidate."""
        return [r.judge_addressing for r in self.results]

    def addressing_report(self, *, step: int | None) -> AddressingReport:
        """The request's report for the audit (kind `reflection`)."""
        flags = self.addressing
        return AddressingReport(
            kind="reflection",
            items=len(self.results),
            flagged=sum(any(m.startswith("candidate:") for m in found) for found in flags),
            markers=[
                f"candidate {i}: {m.partition(': ')[2]}" if m.startswith("candidate:") else m
                for i, found in enumerate(flags)
                for m in found
            ],
            step=step,
        )


def _rate(checks: list[FormatCheck], judged: list[_Judged], *, usage: Usage) -> _Rated:
    """Every candidate's outcome and result, counted by status; a request none of whose
    valid candidates could be judged fails (502 `judge_unavailable`, with its usage)."""
    pairs = [_candidate(i, c, j) for i, (c, j) in enumerate(zip(checks, judged, strict=True))]
    rated = _Rated(checks, judged, [o for o, _ in pairs], [r for _, r in pairs])
    for outcome in rated.outcomes:
        REFLECTION_CANDIDATES.labels(outcome.status).inc()
    if rated.n_valid and rated.n_failed == rated.n_valid:
        first = next(j.error for j in judged if j.error)
        raise ServiceError(
            502,
            f"no reflection candidate could be judged: {first}",
            type="judge_unavailable",
            usage=usage_out(usage),
        )
    for result, j in zip(rated.results, judged, strict=True):
        result.judge_addressing = [] if j.result is None else list(j.result.judge_addressing)
    return rated


def _bank_item(request: ReflectionScoreRequest, rated: _Rated, best: int) -> BankItemIn:
    """The bank item of the best candidate, with where it came from."""
    parsed = rated.checks[best].parsed
    assert parsed is not None and rated.outcomes[best].u is not None
    judge = rated.results[best]
    return BankItemIn(
        question=request.question,
        rubrics=parsed.rubrics,
        takeaways=parsed.takeaways,
        reflection=request.candidates[best],
        score=min(1.0, max(0.0, rated.outcomes[best].u or 0.0)),
        step=request.step,
        provenance={
            "source": "reflections/score",
            "candidate_index": best,
            "candidates": len(request.candidates),
            "scoring_id": request.scoring_id,
            "rollout_id": request.rollout_id,
            "u_within": judge.u_within,
            "u_cross": judge.u_cross,
        },
    )


def _not_retryable(exc: UpstreamError) -> bool:
    return exc.status is not None and 400 <= exc.status < 500 and exc.status != 429


def _use(scores: Mapping[Dimension, float]) -> UseScores:
    return UseScores(
        diagnostic_accuracy=scores["diagnostic_accuracy"],
        specificity=scores["specificity"],
        scope_balance=scores["scope_balance"],
    )


def _candidate(
    index: int, check: FormatCheck, judged: _Judged
) -> tuple[CandidateOutcome, CandidateResult]:
    if not check.valid:
        return (
            CandidateOutcome(status="invalid_format", u=0.0, reason=check.reason),
            CandidateResult(
                index=index, status="invalid_format", valid=False, reason=check.reason, u=0.0
            ),
        )
    if judged.result is None:
        FALLBACKS.labels("reflection_unscored").inc()
        reason = f"the judge failed: {judged.error}"
        return (
            CandidateOutcome(status="judge_failed", reason=reason),
            CandidateResult(index=index, status="judge_failed", valid=True, reason=reason, u=None),
        )
    within, cross = _use(judged.result.within), _use(judged.result.cross)
    u = utility(within=within, cross=cross)
    return (
        CandidateOutcome(status="scored", u=u.u),
        CandidateResult(
            index=index,
            status="scored",
            valid=True,
            within=UseScoresOut(**within.as_dict()),
            cross=UseScoresOut(**cross.as_dict()),
            u_within=u.within,
            u_cross=u.cross,
            u=u.u,
            rationale=judged.result.rationale,
        ),
    )


def inline_evidence(given: StagewiseEvidence) -> list[Evidence]:
    rubrics: dict[str, RubricOut] | None = None
    if given.rubrics is not None:
        rubrics = {r.id: r for stage_rubrics in given.rubrics.values() for r in stage_rubrics}
    out = []
    for i, j in enumerate(given.judgments):
        rubric = None if rubrics is None else rubrics.get(j.rubric_id)
        if rubrics is not None and rubric is None:
            raise DomainError(
                f"rubric {j.rubric_id!r} is not in `judgments.rubrics`",
                field=f"judgments.judgments[{i}].rubric_id",
            )
        out.append(_evidence_item(j, rubric))
    return out


def _evidence_item(judgment: Judgment, rubric: RubricView | None) -> Evidence:
    """One judgment as the judge sees it: a judgment whose rubric is not known has its
    rubric id as title, no description, positive polarity."""
    return Evidence(
        stage=judgment.stage,
        title=rubric.title if rubric else judgment.rubric_id,
        description=rubric.description if rubric else "",
        polarity=rubric.polarity if rubric else "positive",
        score=judgment.score,
        justification=judgment.justification,
    )


def stored_evidence(
    scoring: StoredScoring, request: ReflectionScoreRequest
) -> tuple[dict[Stage, float] | None, list[Evidence]]:
    if question_hash(scoring.question) != question_hash(request.question):
        raise DomainError(
            f"the question differs from the question of scoring {scoring.scoring_id!r}",
            field="question",
        )
    rollout_id = request.rollout_id
    if rollout_id is None:
        if len(scoring.rollouts) != 1:
            raise DomainError(
                f"scoring {scoring.scoring_id!r} has {len(scoring.rollouts)} rollouts: name one "
                "with rollout_id",
                field="rollout_id",
            )
        rollout_id = next(iter(scoring.rollouts))
    rollout = scoring.rollouts.get(rollout_id)
    if rollout is None:
        raise DomainError(
            f"scoring {scoring.scoring_id!r} has no rollout {rollout_id!r}", field="rollout_id"
        )
    if not rollout.judgments:
        raise DomainError(
            f"rollout {rollout_id!r} was not scored (no judgments to judge reflections against)",
            field="rollout_id",
        )
    by_id = {r.id: r for r in scoring.rubrics}
    evidence = [_evidence_item(j, by_id.get(j.rubric_id)) for j in rollout.judgments]
    return _judged_stages(rollout.scores), evidence


def _judged_stages(scores: Mapping[Stage, float | None] | None) -> dict[Stage, float] | None:
    """The stage scores the judge sees: stages left without a judgment (null) are left out,
    never shown as 0 (issue 17)."""
    if scores is None:
        return None
    return {stage: value for stage, value in scores.items() if value is not None}
