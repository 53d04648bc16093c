"""Orchestration of reflection rewards and the agent rubric bank (RubricEM §3.4, App. D).

`/v1/reflections/score`: 1. the trajectory's stagewise judgments (inline, or a stored
scoring by id); 2. the two-block format check of every candidate (core); 3. one verifier
call per valid candidate, with privileged access to the judgments, retried on failure;
4. u per candidate (core); 5. the best valid candidate offered to the bank (store), unless a
candidate could not be judged. A malformed candidate gets u = 0 with its reason; a
candidate the judge failed on gets no reward and is flagged, never a silent 0. What the
verifier found addressing the judge (GitHub issue 25) is copied per candidate
(`judge_addressing`) and a flagged request is handed to the audit (kind `reflection`).
"""

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol
from urllib.parse import quote

from prometheus_client import Counter
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from rubricate.common.errors import ServiceError
from rubricate.common.metrics import FALLBACKS
from rubricate.common.tenancy import TENANT_HEADER
from rubricate.common.request_context import WaitClock
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
from rubricate.reflections.store.schemas import (
    BankItemIn,
    OfferResponse,
    RetrieveRequest,
    RetrieveResponse,
)
from rubricate.reflections.verifier.schemas import ReflectionScoresRequest, ReflectionScoresResponse
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
from rubricate_client.schemas.rubrics import Stage
from rubricate_client.schemas.scorings import StoredScoring
from rubricate_client.schemas.stagewise import (
    RubricOut,
    Timing,
)

log = logging.getLogger("rubricate.gateway")

AddressingReporter = Callable[[str, AddressingReport], None]
"""Where a request in which something addressed the judge is handed to the audit (tenant,
report): the gateway's `AuditSubmitter.addressing`, which returns at once and never raises."""

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

JUDGE_PATH = "/v1/tasks/reflection-scores"


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

    # --- /v1/reflections/score ------------------------------------------------------------

    async def score(
        self, request: ReflectionScoreRequest, *, tenant: str
    ) -> ReflectionScoreResponse:
        started = time.perf_counter()
        headers = {TENANT_HEADER: tenant}
        clock = WaitClock()
        usage = Usage()
        if len(request.trajectory) > self.settings.max_trajectory_chars:
            raise DomainError(
                f"trajectory longer than {self.settings.max_trajectory_chars} characters",
                field="trajectory",
            )
        stage_scores, evidence = await self._evidence(request, headers=headers, clock=clock)
        checks = [check_format(text) for text in request.candidates]
        judged = await self._judge_all(request, checks, stage_scores, evidence, clock, usage)

        outcomes: list[CandidateOutcome] = []
        results: list[CandidateResult] = []
        for i, (check, j) in enumerate(zip(checks, judged, strict=True)):
            outcome, result = _candidate(i, check, j)
            outcomes.append(outcome)
            results.append(result)
        for outcome in outcomes:
            REFLECTION_CANDIDATES.labels(outcome.status).inc()
        n_valid = sum(1 for c in checks if c.valid)
        n_failed = sum(1 for o in outcomes if o.status == "judge_failed")
        if n_valid and n_failed == n_valid:
            first = next(j.error for j in judged if j.error)
            raise ServiceError(
                502,
                f"no reflection candidate could be judged: {first}",
                type="judge_unavailable",
                usage=usage_out(usage),
            )

        flags = [[] if j.result is None else list(j.result.judge_addressing) for j in judged]
        for result, found in zip(results, flags, strict=True):
            result.judge_addressing = found
        _hand_over(
            self.audit,
            tenant,
            AddressingReport(
                kind="reflection",
                items=len(results),
                flagged=sum(any(m.startswith("candidate:") for m in found) for found in flags),
                markers=[
                    f"candidate {i}: {m.partition(': ')[2]}" if m.startswith("candidate:") else m
                    for i, found in enumerate(flags)
                    for m in found
                ],
                step=request.step,
            ),
        )
        qhash = question_hash(request.question)
        bank = await self._write_bank(request, checks, outcomes, results, qhash, headers, clock)
        total = time.perf_counter() - started
        upstream = clock.total()
        best = best_candidate(outcomes)
        log.info(
            "reflection.scored question_hash=%s candidates=%d valid=%d failed=%d best=%s "
            "written=%s seconds=%.2f",
            qhash[:12],
            len(results),
            n_valid,
            n_failed,
            best,
            bank.written,
            total,
        )
        return ReflectionScoreResponse(
            question_hash=qhash,
            candidates=results,
            best_index=best,
            bank=bank,
            weights=dict(DIMENSION_WEIGHTS),
            usage=usage_out(usage),
            timing=Timing(
                total_s=total, upstream_s=upstream, overhead_s=max(0.0, total - upstream)
            ),
            judge_addressing=any(flags),
        )

    async def _evidence(
        self, request: ReflectionScoreRequest, *, headers: dict[str, str], clock: WaitClock
    ) -> tuple[dict[Stage, float] | None, list[Evidence]]:
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
        try:
            scoring = await self.store.request(
                "GET",
                f"/v1/scorings/{quote(request.scoring_id, safe='')}",
                response_model=StoredScoring,
                headers=headers,
                clock=clock,
            )
        except UpstreamError as exc:
            if exc.status == 404:
                raise ServiceError(
                    404,
                    f"no stagewise scoring {request.scoring_id!r} (unknown or expired)",
                    type="not_found",
                    field="scoring_id",
                ) from exc
            raise
        return stored_evidence(scoring, request)

    async def _judge_all(
        self,
        request: ReflectionScoreRequest,
        checks: Sequence[FormatCheck],
        stage_scores: dict[Stage, float] | None,
        evidence: list[Evidence],
        clock: WaitClock,
        usage: Usage,
    ) -> list[_Judged]:
        gate = asyncio.Semaphore(self.reflection.judge_concurrency)

        async def one(text: str, check: FormatCheck) -> _Judged:
            judged = _Judged()
            if not check.valid:
                return judged
            body = ReflectionScoresRequest(
                question=request.question,
                trajectory=request.trajectory,
                stage_scores=stage_scores,
                evidence=evidence,
                candidate=text,
            )
            async with gate:
                for attempt in range(1, self.reflection.judge_attempts + 1):
                    try:
                        judged.result = await self.verifier.request(
                            "POST",
                            JUDGE_PATH,
                            json=body.model_dump(mode="json"),
                            response_model=ReflectionScoresResponse,
                            clock=clock,
                        )
                        usage.merge(judged.result.usage)
                        judged.error = None
                        return judged
                    except UpstreamError as exc:
                        if exc.usage is not None:
                            usage.merge(exc.usage)
                        judged.error = f"{exc.type}: {exc.message}"
                        log.warning(
                            "reflection.judge_failed attempt=%d/%d error=%s",
                            attempt,
                            self.reflection.judge_attempts,
                            judged.error,
                        )
                        if _not_retryable(exc):
                            break
            return judged

        return list(
            await asyncio.gather(
                *(one(t, c) for t, c in zip(request.candidates, checks, strict=True))
            )
        )

    async def _write_bank(
        self,
        request: ReflectionScoreRequest,
        checks: Sequence[FormatCheck],
        outcomes: Sequence[CandidateOutcome],
        results: list[CandidateResult],
        qhash: str,
        headers: dict[str, str],
        clock: WaitClock,
    ) -> BankWrite:
        decision = bank_decision(outcomes, accept_threshold=self.reflection.accept_threshold)
        if not request.write_to_bank:
            return BankWrite(written=False, reason="write_to_bank is false", question_hash=qhash)
        if not decision.write or decision.index is None:
            BANK_WRITES.labels("skipped").inc()
            return BankWrite(written=False, reason=decision.reason, question_hash=qhash)
        best = decision.index
        parsed = checks[best].parsed
        assert parsed is not None and outcomes[best].u is not None
        judge = results[best]
        item = BankItemIn(
            question=request.question,
            rubrics=parsed.rubrics,
            takeaways=parsed.takeaways,
            reflection=request.candidates[best],
            score=min(1.0, max(0.0, outcomes[best].u or 0.0)),
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
        try:
            offered = await self.store.request(
                "POST",
                "/v1/bank/items",
                json=item.model_dump(mode="json"),
                response_model=OfferResponse,
                headers=headers,
                clock=clock,
            )
        except UpstreamError as exc:
            BANK_WRITES.labels("failed").inc()
            log.warning("reflection.bank_write_failed question_hash=%s error=%s", qhash[:12], exc)
            return BankWrite(
                written=False, reason=f"bank write failed: {exc.message}", question_hash=qhash
            )
        BANK_WRITES.labels("written" if offered.written else "kept").inc()
        results[best].written = offered.written
        return BankWrite(
            written=offered.written,
            reason=offered.reason,
            question_hash=qhash,
            version=offered.item.version,
        )

    # --- /v1/bank/retrieve ----------------------------------------------------------------

    async def retrieve(self, request: BankRetrieveRequest, *, tenant: str) -> BankRetrieveResponse:
        found = await self.store.request(
            "POST",
            "/v1/bank/retrieve",
            json=RetrieveRequest(
                question=request.question, mode=request.mode, k=request.k
            ).model_dump(mode="json"),
            response_model=RetrieveResponse,
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
        out.append(
            Evidence(
                stage=j.stage,
                title=rubric.title if rubric else j.rubric_id,
                description=rubric.description if rubric else "",
                polarity=rubric.polarity if rubric else "positive",
                score=j.score,
                justification=j.justification,
            )
        )
    return out


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
    evidence = []
    for j in rollout.judgments:
        rubric = by_id.get(j.rubric_id)
        evidence.append(
            Evidence(
                stage=j.stage,
                title=rubric.title if rubric else j.rubric_id,
                description=rubric.description if rubric else "",
                polarity=rubric.polarity if rubric else "positive",
                score=j.score,
                justification=j.justification,
            )
        )
    return _judged_stages(rollout.scores), evidence


def _judged_stages(scores: Mapping[Stage, float | None] | None) -> dict[Stage, float] | None:
    """The stage scores the judge sees: stages left without a judgment (null) are left out,
    never shown as 0 (issue 17)."""
    if scores is None:
        return None
    return {stage: value for stage, value in scores.items() if value is not None}


def _hand_over(
    audit: AddressingReporter | None, tenant: str | None, report: AddressingReport
) -> None:
    """Hand a request in which something addressed the judge to the audit, when there is an
    audit and a tenant (the reporter returns at once and never raises)."""
    if audit is not None and tenant is not None and (report.markers or report.flagged):
        audit(tenant, report)
