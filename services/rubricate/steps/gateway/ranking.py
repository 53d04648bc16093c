"""Listwise rubric rewards and multi-judge ranking (Co-ReAct §3.1, §3.2, App. A).

- listwise reward: each parseable, ungated rubric scores every candidate (one verdicts call
  per candidate); the induced ranking is compared with the expert or Borda consensus. A
  rubric whose calls fail after retries is flagged `error` with a null reward.
- rank: J judges, each seeing the slate shuffled and relabelled on its own; a judge without
  a parseable ranking after retries is dropped and reported; Borda consensus of the rest.

Candidates, rubric criteria and histories that address the judge (GitHub issue 25) are found
and withheld by the verifier; the responses say which (`judge_addressing`,
`candidate_addressing`, `history_addressing`) and, with a tenant, the request is handed to
the audit (kinds `listwise`, `rank`).
"""

import asyncio
import logging
import secrets
import time
from collections.abc import Callable, Sequence
from typing import Literal, Protocol

from rubricate.common.errors import ServiceError
from rubricate.common.metrics import FALLBACKS
from rubricate.common.request_context import WaitClock
from rubricate.common.upstream import ServiceClient, UpstreamError
from rubricate.common.usage import Usage, usage_out
from rubricate.steps.domain.listwise import (
    RubricReward,
    Tiers,
    atomicity,
    borda_consensus,
    format_score,
    group_advantages,
    judge_order,
    judge_seed,
    labels_to_tiers,
    neutral_labels,
    parse_rubric_text,
    ranks_from_tiers,
    repetition_rate,
    rubric_reward,
    spearman,
    tiers_from_scores,
    to_tiers,
)
from rubricate.steps.domain.rewards import Criterion, Verdict, make_rubric, weighted_fraction
from rubricate.steps.verifier.schemas import LabeledCandidate, RankTaskRequest, RankTaskResponse
from rubricate_client.constants import RANK_MIN_VALID_JUDGES, REPETITION_MAX_RATE
from rubricate_client.errors import DomainError
from rubricate_client.schemas.audit import AddressingReport
from rubricate_client.schemas.stagewise import Timing
from rubricate_client.schemas.steps import (
    CandidateAddressing,
    CriterionOut,
    JudgeOut,
    ListwiseRewardRequest,
    ListwiseRewardResponse,
    RankRequest,
    RankResponse,
    RubricRewardOut,
    Trajectory,
)

log = logging.getLogger("rubricate.steps.gateway.ranking")

AddressingReporter = Callable[[str, AddressingReport], None]
"""Where a request in which something addressed the judge is handed to the audit (tenant,
report): the gateway's `AuditSubmitter.addressing`, which returns at once and never raises."""

RubricStatus = Literal["ok", "unparseable", "error"]


class StepCalls(Protocol):
    """What ranking needs from the step service: verifier verdicts and history rendering."""

    async def verdicts_flagged(
        self,
        *,
        question: str,
        history: str,
        action: str,
        criteria: Sequence[Criterion],
        clock: WaitClock,
        usage: Usage,
    ) -> tuple[list[Verdict], list[str]]: ...

    def history(self, history: Trajectory) -> str: ...


class RankingService:
    def __init__(
        self,
        *,
        calls: StepCalls,
        judges: Sequence[ServiceClient],
        concurrency: int,
        rank_temperature: float,
        audit: AddressingReporter | None = None,
    ) -> None:
        if not judges:
            raise ValueError("at least one judge client")
        self.calls = calls
        self.judges = list(judges)
        self.concurrency = concurrency
        self.rank_temperature = rank_temperature
        self.audit = audit

    # --- listwise reward ------------------------------------------------------------------

    async def listwise_reward(
        self, request: ListwiseRewardRequest, tenant: str | None = None
    ) -> ListwiseRewardResponse:
        started = time.perf_counter()
        n = len(request.candidates)
        consensus, points = _consensus(request, n=n)
        expert_ranks = ranks_from_tiers(consensus, n=n)
        history = self.calls.history(request.history)
        clock = WaitClock()
        usage = Usage()
        gate = asyncio.Semaphore(self.concurrency)
        found = _Found()

        async def score_candidate(
            rubric: int, criteria: list[Criterion], index: int, candidate: str
        ) -> float:
            async with gate:
                verdicts, markers = await self.calls.verdicts_flagged(
                    question=request.question,
                    history=history,
                    action=candidate,
                    criteria=criteria,
                    clock=clock,
                    usage=usage,
                )
            found.add(markers, candidate=index, rubric=rubric)
            return weighted_fraction(criteria, [v.satisfied for v in verdicts])

        async def one(index: int, text: str) -> RubricRewardOut:
            parsed = parse_rubric_text(text)
            r_fmt = format_score(parsed, k=request.k)
            if parsed is None:
                reward = rubric_reward(
                    rho=None, r_atom=0.0, r_fmt=r_fmt, repetition=repetition_rate([text])
                )
                return _out(index, "unparseable", reward=reward)
            criteria = make_rubric(parsed.criteria, parsed.weights)
            repetition = repetition_rate(parsed.criteria)
            r_atom = atomicity(parsed.criteria)
            if repetition > REPETITION_MAX_RATE:
                # gated: the total is 0 whatever the ranking, so the verifier is not asked
                reward = rubric_reward(rho=None, r_atom=r_atom, r_fmt=r_fmt, repetition=repetition)
                return _out(index, "ok", criteria=criteria, reward=reward)
            # wait for every call (their usage counts) before judging the outcome
            results = await asyncio.gather(
                *(score_candidate(index, criteria, j, c) for j, c in enumerate(request.candidates)),
                return_exceptions=True,
            )
            failures = [r for r in results if isinstance(r, BaseException)]
            if failures:
                if not all(isinstance(f, UpstreamError) for f in failures):
                    raise next(f for f in failures if not isinstance(f, UpstreamError))
                FALLBACKS.labels("rubric_unscored").inc()
                log.warning("listwise.rubric_failed rubric=%d error=%s", index, failures[0])
                terms = rubric_reward(rho=None, r_atom=r_atom, r_fmt=r_fmt, repetition=repetition)
                return _out(index, "error", criteria=criteria, reward=terms, error=failures[0])
            scores = [r for r in results if isinstance(r, float)]
            induced = ranks_from_tiers(tiers_from_scores(scores), n=n)
            reward = rubric_reward(
                rho=spearman(induced, expert_ranks),
                r_atom=r_atom,
                r_fmt=r_fmt,
                repetition=repetition,
            )
            return _out(index, "ok", criteria=criteria, scores=scores, reward=reward)

        rubrics = list(await asyncio.gather(*(one(i, t) for i, t in enumerate(request.rubrics))))
        for r in rubrics:
            r.judge_addressing = found.rubric_markers(r.index)
        if all(r.status == "error" for r in rubrics):
            raise ServiceError(
                502,
                f"no rubric could be scored: {rubrics[0].error}",
                type="judge_unavailable",
                usage=usage_out(usage),
            )
        scored = [r for r in rubrics if r.reward is not None]
        advantages = group_advantages([r.reward for r in scored if r.reward is not None])
        for r, advantage in zip(scored, advantages, strict=True):
            r.advantage = advantage
        log.info(
            "listwise.scored rubrics=%d candidates=%d errors=%d",
            len(rubrics),
            n,
            sum(r.status == "error" for r in rubrics),
        )
        candidate_addressing = found.candidates()
        _hand_over(
            self.audit,
            tenant,
            AddressingReport(
                kind="listwise",
                items=n,
                flagged=len(candidate_addressing),
                markers=found.all_markers(),
            ),
        )
        return ListwiseRewardResponse(
            consensus=consensus,
            borda_points=points,
            rubrics=rubrics,
            usage=usage_out(usage),
            timing=timing_since(started, clock),
            judge_addressing=found.any(),
            candidate_addressing=candidate_addressing,
            history_addressing=found.history,
        )

    # --- multi-judge ranking --------------------------------------------------------------

    async def rank(self, request: RankRequest, tenant: str | None = None) -> RankResponse:
        started = time.perf_counter()
        n = len(request.candidates)
        judges = request.judges
        min_valid = (
            request.min_valid
            if request.min_valid is not None
            else min(RANK_MIN_VALID_JUDGES, judges)
        )
        if min_valid > judges:
            raise DomainError(f"must be at most `judges` ({judges})", field="min_valid")
        seed = request.seed if request.seed is not None else secrets.randbelow(2**31)
        temperature = self.rank_temperature if request.temperature is None else request.temperature
        history = self.calls.history(request.history)
        labels = neutral_labels(n)
        clock = WaitClock()
        gate = asyncio.Semaphore(self.concurrency)
        found = _Found()

        async def one(j: int) -> tuple[JudgeOut, Tiers | None, Usage]:
            seed_j = judge_seed(seed, j)
            order = judge_order(n, seed=seed_j)
            client = self.judges[j % len(self.judges)]
            spent = Usage()
            body = RankTaskRequest(
                question=request.question,
                history=history,
                candidates=[
                    LabeledCandidate(label=labels[p], text=request.candidates[order[p]])
                    for p in range(n)
                ],
                temperature=temperature,
                seed=seed_j,
            )
            tiers: Tiers | None = None
            rationale: str | None = None
            error: str | None = None
            try:
                async with gate:
                    answer = await client.task(
                        "/v1/tasks/rank",
                        body,
                        response_model=RankTaskResponse,
                        clock=clock,
                        usage=spent,
                    )
                for label, markers in answer.judge_addressing.items():
                    if label == "history":
                        found.add([f"history: {m}" for m in markers])
                    elif label in labels:
                        index = order[labels.index(label)]
                        found.add([f"action: {m}" for m in markers], candidate=index)
                tiers, rationale = labels_to_tiers(answer.ranking, order=order), answer.rationale
            except UpstreamError as exc:
                error = str(exc)
            except ValueError as exc:
                error = f"{client.service}: unusable ranking: {exc}"
            if tiers is None:
                FALLBACKS.labels("judge_dropped").inc()
                log.warning("rank.judge_dropped judge=%d error=%s", j, error)
            out = JudgeOut(
                judge=j,
                server=client.service,
                status="dropped" if tiers is None else "ok",
                order=order,
                labels={label: order[p] for p, label in enumerate(labels)},
                ranking=tiers,
                rationale=rationale,
                error=error,
                usage=usage_out(spent),
            )
            return out, tiers, spent

        results = await asyncio.gather(*(one(j) for j in range(judges)))
        usage = Usage()
        for _, _, spent in results:
            usage.merge(spent)
        valid = [tiers for _, tiers, _ in results if tiers is not None]
        dropped = [out.judge for out, tiers, _ in results if tiers is None]
        if len(valid) < min_valid:
            reasons = "; ".join(f"judge {out.judge}: {out.error}" for out, _, _ in results)
            raise ServiceError(
                502,
                f"{len(valid)} of {judges} judges returned a parseable ranking, "
                f"{min_valid} needed: {reasons}",
                type="insufficient_judges",
                usage=usage_out(usage),
            )
        consensus, points = borda_consensus(valid, n=n)
        log.info("rank.done candidates=%d judges=%d dropped=%d", n, judges, len(dropped))
        candidate_addressing = found.candidates()
        _hand_over(
            self.audit,
            tenant,
            AddressingReport(
                kind="rank",
                items=n,
                flagged=len(candidate_addressing),
                markers=found.all_markers(),
            ),
        )
        return RankResponse(
            consensus=consensus,
            borda_points=points,
            judges=[out for out, _, _ in results],
            dropped=dropped,
            seed=seed,
            usage=usage_out(usage),
            timing=timing_since(started, clock),
            judge_addressing=found.any(),
            candidate_addressing=candidate_addressing,
            history_addressing=found.history,
        )


class _Found:
    """What the verifier found addressing the judge across one request's calls, each marker
    once: per candidate (`action: ...`), per rubric (`criterion i: ...`), in the history."""

    def __init__(self) -> None:
        self._candidates: dict[int, dict[str, None]] = {}
        self._rubrics: dict[int, dict[str, None]] = {}
        self._history: dict[str, None] = {}

    def add(
        self, markers: Sequence[str], *, candidate: int | None = None, rubric: int | None = None
    ) -> None:
        for marker in markers:
            where, _, what = marker.partition(": ")
            if where == "action" and candidate is not None:
                self._candidates.setdefault(candidate, {})[what] = None
            elif where == "history":
                self._history[what] = None
            elif where.startswith("criterion") and rubric is not None:
                self._rubrics.setdefault(rubric, {})[marker] = None

    @property
    def history(self) -> list[str]:
        return list(self._history)

    def candidates(self) -> list[CandidateAddressing]:
        return [
            CandidateAddressing(index=i, markers=list(markers))
            for i, markers in sorted(self._candidates.items())
        ]

    def rubric_markers(self, rubric: int) -> list[str]:
        return list(self._rubrics.get(rubric, {}))

    def any(self) -> bool:
        return bool(self._candidates or self._rubrics or self._history)

    def all_markers(self) -> list[str]:
        out = [f"candidate {i}: {m}" for i, ms in sorted(self._candidates.items()) for m in ms]
        out += [f"rubric {i}: {m}" for i, ms in sorted(self._rubrics.items()) for m in ms]
        out += [f"history: {m}" for m in self._history]
        return out


def timing_since(started: float, clock: WaitClock) -> Timing:
    total = time.perf_counter() - started
    upstream = clock.total()
    return Timing(total_s=total, upstream_s=upstream, overhead_s=max(0.0, total - upstream))


def _consensus(request: ListwiseRewardRequest, *, n: int) -> tuple[Tiers, list[float] | None]:
    if (request.expert_ranking is None) == (request.judge_rankings is None):
        raise DomainError(
            "give exactly one of `expert_ranking` and `judge_rankings`", field="expert_ranking"
        )
    if request.expert_ranking is not None:
        return to_tiers(request.expert_ranking, n=n, field="expert_ranking"), None
    assert request.judge_rankings is not None
    rankings = [
        to_tiers(r, n=n, field=f"judge_rankings[{j}]") for j, r in enumerate(request.judge_rankings)
    ]
    return borda_consensus(rankings, n=n)


def _out(
    index: int,
    status: RubricStatus,
    *,
    reward: RubricReward,
    criteria: Sequence[Criterion] | None = None,
    scores: list[float] | None = None,
    error: BaseException | None = None,
) -> RubricRewardOut:
    """A rubric's result. `reward` carries the shaping terms; its ρ and total are used only
    for a rubric that was ranked (`scores`) or could not be (`unparseable`: r_rank 0, or
    gated: no ρ, total 0). An `error` rubric has no ρ, r_rank or reward."""
    ranked = scores is not None
    return RubricRewardOut(
        index=index,
        status=status,
        criteria=None
        if criteria is None
        else [CriterionOut(text=c.text, weight=c.weight) for c in criteria],
        candidate_scores=scores,
        induced_ranking=None if scores is None else tiers_from_scores(scores),
        rho=reward.rho if ranked else None,
        r_rank=reward.r_rank if ranked or status == "unparseable" else None,
        r_atom=reward.r_atom,
        r_fmt=reward.r_fmt,
        repetition=reward.repetition,
        gated=reward.gated,
        reward=None if status == "error" else reward.total,
        advantage=None,
        error=None if error is None else str(error),
    )


def _hand_over(
    audit: AddressingReporter | None, tenant: str | None, report: AddressingReport
) -> None:
    """Hand a request in which something addressed the judge to the audit, when there is an
    audit and a tenant (the reporter returns at once and never raises)."""
    if audit is not None and tenant is not None and (report.markers or report.flagged):
        audit(tenant, report)
