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

Each request opens one `request_context`: its model-server calls count their wait to its
clock and their LLM usage to it (a rank judge's first to its own usage, reported per judge).
"""

import asyncio
import logging
import secrets
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

from rubricate.common.addressing import AddressingReporter, hand_over
from rubricate.common.errors import ServiceError
from rubricate.common.metrics import FALLBACKS
from rubricate.common.request_context import RequestContext, current_context, request_context
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
from rubricate.steps.domain.rewards import Criterion, make_rubric, weighted_fraction
from rubricate.steps.gateway.shared import judge_unavailable, step_verdicts, timing_since
from rubricate.steps.verifier.endpoints import LISTWISE_RANK
from rubricate.steps.verifier.schemas import LabeledCandidate, RankTaskRequest, RankTaskResponse
from rubricate_client.constants import RANK_MIN_VALID_JUDGES, REPETITION_MAX_RATE
from rubricate_client.errors import DomainError
from rubricate_client.schemas.audit import AddressingReport
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

RubricStatus = Literal["ok", "unparseable", "error"]


class RankingService:
    def __init__(
        self,
        *,
        verifier: ServiceClient,
        history: Callable[[Trajectory], str],
        judges: Sequence[ServiceClient],
        concurrency: int,
        rank_temperature: float,
        audit: AddressingReporter | None = None,
    ) -> None:
        if not judges:
            raise ValueError("at least one judge client")
        self.verifier = verifier
        self.history = history
        self.judges = list(judges)
        self.concurrency = concurrency
        self.rank_temperature = rank_temperature
        self.audit = audit

    async def listwise_reward(
        self, request: ListwiseRewardRequest, tenant: str | None = None
    ) -> ListwiseRewardResponse:
        """1. the consensus ranking (the expert's, or the Borda consensus of judge rankings);
        2. every rubric rewarded at once (`_Listwise.reward`); 3. fail when no rubric could
        be scored; 4. the group advantages of the rewards; 5. with a tenant, hand a request
        in which something addressed the judge to the audit (kind `listwise`); 6. respond."""
        started = time.perf_counter()
        n = len(request.candidates)
        consensus, points = _consensus(request, n=n)
        listwise = _Listwise(
            verifier=self.verifier,
            request=request,
            expert_ranks=ranks_from_tiers(consensus, n=n),
            history=self.history(request.history),
            gate=asyncio.Semaphore(self.concurrency),
        )
        with request_context() as ctx:
            rubrics = list(
                await asyncio.gather(
                    *(listwise.reward(i, t) for i, t in enumerate(request.rubrics))
                )
            )
        for r in rubrics:
            r.judge_addressing = listwise.found.rubric_markers(r.index)
        if all(r.status == "error" for r in rubrics):
            raise judge_unavailable("rubric", rubrics[0].error, ctx)
        _set_advantages(rubrics)
        errors = sum(r.status == "error" for r in rubrics)
        log.info("listwise.scored rubrics=%d candidates=%d errors=%d", len(rubrics), n, errors)
        hand_over(self.audit, tenant, listwise.found.report("listwise", items=n))
        return ListwiseRewardResponse(
            consensus=consensus,
            borda_points=points,
            rubrics=rubrics,
            **listwise.found.accounted(ctx, started),
        )

    async def rank(self, request: RankRequest, tenant: str | None = None) -> RankResponse:
        """1. how many judges must answer, the seed and the temperature; 2. every judge asked
        at once, each seeing the slate shuffled and relabelled on its own (`_Ranking.judge`);
        3. fail when fewer than `min_valid` gave a parseable ranking; 4. the Borda consensus
        of the rest; 5. with a tenant, hand a request in which something addressed the judge
        to the audit (kind `rank`); 6. respond."""
        started = time.perf_counter()
        n = len(request.candidates)
        min_valid = _min_valid(request)
        seed = request.seed if request.seed is not None else secrets.randbelow(2**31)
        ranking = _Ranking(
            judges=self.judges,
            request=request,
            history=self.history(request.history),
            labels=neutral_labels(n),
            seed=seed,
            temperature=self.rank_temperature
            if request.temperature is None
            else request.temperature,
            gate=asyncio.Semaphore(self.concurrency),
        )
        with request_context() as ctx:
            judged = await asyncio.gather(*(ranking.judge(j) for j in range(request.judges)))
        for one in judged:
            ctx.usage.merge(one.spent)
        valid = [one.tiers for one in judged if one.tiers is not None]
        if len(valid) < min_valid:
            raise _insufficient_judges(judged, len(valid), min_valid, ctx.usage)
        consensus, points = borda_consensus(valid, n=n)
        dropped = [one.out.judge for one in judged if one.tiers is None]
        log.info("rank.done candidates=%d judges=%d dropped=%d", n, request.judges, len(dropped))
        hand_over(self.audit, tenant, ranking.found.report("rank", items=n))
        return RankResponse(
            consensus=consensus,
            borda_points=points,
            judges=[one.out for one in judged],
            dropped=dropped,
            seed=seed,
            **ranking.found.accounted(ctx, started),
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

    def report(self, kind: Literal["listwise", "rank"], *, items: int) -> AddressingReport:
        """The audit's report of the request: each candidate that addresses the judge is
        flagged, every marker is named after where it was found."""
        return AddressingReport(
            kind=kind, items=items, flagged=len(self._candidates), markers=self.all_markers()
        )

    def accounted(self, ctx: RequestContext, started: float) -> dict[str, Any]:
        """The fields a slate's response ends with: the request's usage and timing, and
        what addressed the judge (whether anything did, per candidate, in the history)."""
        return {
            "usage": usage_out(ctx.usage),
            "timing": timing_since(started, ctx),
            "judge_addressing": self.any(),
            "candidate_addressing": self.candidates(),
            "history_addressing": self.history,
        }

    def all_markers(self) -> list[str]:
        out = [f"candidate {i}: {m}" for i, ms in sorted(self._candidates.items()) for m in ms]
        out += [f"rubric {i}: {m}" for i, ms in sorted(self._rubrics.items()) for m in ms]
        out += [f"history: {m}" for m in self._history]
        return out


@dataclass
class _Listwise:
    """One listwise request being rewarded: what every rubric's verdicts calls share."""

    verifier: ServiceClient
    request: ListwiseRewardRequest
    expert_ranks: list[float]
    history: str
    gate: asyncio.Semaphore
    found: _Found = field(default_factory=_Found)

    async def reward(self, index: int, text: str) -> RubricRewardOut:
        """A sampled rubric's reward: an unparseable one gets r_rank 0; a gated one (too
        repetitive) a total of 0 whatever the ranking, so the verifier is not asked; else
        every candidate is scored against it and the ranking it induces is compared with the
        consensus. A rubric whose calls fail after retries is `error`, with a null reward."""
        parsed = parse_rubric_text(text)
        r_fmt = format_score(parsed, k=self.request.k)
        if parsed is None:
            reward = rubric_reward(
                rho=None, r_atom=0.0, r_fmt=r_fmt, repetition=repetition_rate([text])
            )
            return _out(index, "unparseable", reward=reward)
        criteria = make_rubric(parsed.criteria, parsed.weights)
        repetition = repetition_rate(parsed.criteria)
        r_atom = atomicity(parsed.criteria)
        if repetition > REPETITION_MAX_RATE:
            reward = rubric_reward(rho=None, r_atom=r_atom, r_fmt=r_fmt, repetition=repetition)
            return _out(index, "ok", criteria=criteria, reward=reward)
        scores = await self._candidate_scores(index, criteria)
        if isinstance(scores, UpstreamError):
            FALLBACKS.labels("rubric_unscored").inc()
            log.warning("listwise.rubric_failed rubric=%d error=%s", index, scores)
            terms = rubric_reward(rho=None, r_atom=r_atom, r_fmt=r_fmt, repetition=repetition)
            return _out(index, "error", criteria=criteria, reward=terms, error=scores)
        induced = ranks_from_tiers(tiers_from_scores(scores), n=len(scores))
        reward = rubric_reward(
            rho=spearman(induced, self.expert_ranks),
            r_atom=r_atom,
            r_fmt=r_fmt,
            repetition=repetition,
        )
        return _out(index, "ok", criteria=criteria, scores=scores, reward=reward)

    async def _candidate_scores(
        self, rubric: int, criteria: list[Criterion]
    ) -> list[float] | UpstreamError:
        """Every candidate's weighted satisfied fraction under the rubric, or the first
        upstream failure. Every call is awaited (their usage counts) before the outcome is
        judged; any other failure is raised."""
        results = await asyncio.gather(
            *(
                self._candidate_score(rubric, criteria, j, candidate)
                for j, candidate in enumerate(self.request.candidates)
            ),
            return_exceptions=True,
        )
        failures = [r for r in results if isinstance(r, BaseException)]
        upstream = [f for f in failures if isinstance(f, UpstreamError)]
        if len(upstream) < len(failures):
            raise next(f for f in failures if not isinstance(f, UpstreamError))
        if upstream:
            return upstream[0]
        return [r for r in results if isinstance(r, float)]

    async def _candidate_score(
        self, rubric: int, criteria: list[Criterion], index: int, candidate: str
    ) -> float:
        async with self.gate:
            verdicts, markers = await step_verdicts(
                self.verifier,
                question=self.request.question,
                history=self.history,
                action=candidate,
                criteria=criteria,
            )
        self.found.add(markers, candidate=index, rubric=rubric)
        return weighted_fraction(criteria, [v.satisfied for v in verdicts])


@dataclass
class _Judged:
    """One rank judge's answer (`out`), its ranking (None: dropped) and the usage it spent."""

    out: JudgeOut
    tiers: Tiers | None
    spent: Usage


@dataclass
class _Ranking:
    """One multi-judge ranking request: what every judge's call shares."""

    judges: Sequence[ServiceClient]
    request: RankRequest
    history: str
    labels: list[str]
    seed: int
    temperature: float
    gate: asyncio.Semaphore
    found: _Found = field(default_factory=_Found)

    async def judge(self, j: int) -> _Judged:
        """Judge `j` (the judge clients in turn) ranks the slate in its own order under
        neutral labels; a call that fails after retries, or a ranking that cannot be read,
        drops the judge (reported, with its error)."""
        seed = judge_seed(self.seed, j)
        order = judge_order(len(self.request.candidates), seed=seed)
        client = self.judges[j % len(self.judges)]
        body = self._task(order, seed)
        spent = Usage()
        tiers: Tiers | None = None
        rationale: str | None = None
        error: str | None = None
        try:
            with _judge_account(spent):
                async with self.gate:
                    answer = await client.call(LISTWISE_RANK, body)
            self._note_addressing(answer, order)
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
            labels={label: order[p] for p, label in enumerate(self.labels)},
            ranking=tiers,
            rationale=rationale,
            error=error,
            usage=usage_out(spent),
        )
        return _Judged(out=out, tiers=tiers, spent=spent)

    def _task(self, order: Sequence[int], seed: int) -> RankTaskRequest:
        """The slate as one judge sees it: candidate `order[p]` under label `p`."""
        return RankTaskRequest(
            question=self.request.question,
            history=self.history,
            candidates=[
                LabeledCandidate(label=label, text=self.request.candidates[order[p]])
                for p, label in enumerate(self.labels)
            ],
            temperature=self.temperature,
            seed=seed,
        )

    def _note_addressing(self, answer: RankTaskResponse, order: Sequence[int]) -> None:
        """What the judge found addressing it, per label mapped back to the candidate."""
        for label, markers in answer.judge_addressing.items():
            if label == "history":
                self.found.add([f"history: {m}" for m in markers])
            elif label in self.labels:
                index = order[self.labels.index(label)]
                self.found.add([f"action: {m}" for m in markers], candidate=index)


@contextmanager
def _judge_account(spent: Usage) -> Iterator[None]:
    """Count one judge's calls to its own usage (`spent`, reported per judge) and their wait
    to the request's clock (the request's context, opened by `rank`)."""
    request = current_context()
    with request_context(usage=spent) as judge:
        if request is not None:
            judge.clock = request.clock
        yield


def _min_valid(request: RankRequest) -> int:
    """How many judges must give a parseable ranking (at most `judges`)."""
    if request.min_valid is None:
        return min(RANK_MIN_VALID_JUDGES, request.judges)
    if request.min_valid > request.judges:
        raise DomainError(f"must be at most `judges` ({request.judges})", field="min_valid")
    return request.min_valid


def _insufficient_judges(
    judged: Sequence[_Judged], valid: int, min_valid: int, usage: Usage
) -> ServiceError:
    reasons = "; ".join(f"judge {one.out.judge}: {one.out.error}" for one in judged)
    return ServiceError(
        502,
        f"{valid} of {len(judged)} judges returned a parseable ranking, "
        f"{min_valid} needed: {reasons}",
        type="insufficient_judges",
        usage=usage_out(usage),
    )


def _set_advantages(rubrics: Sequence[RubricRewardOut]) -> None:
    """The group advantage of each rubric that has a reward (GRPO: within the group)."""
    scored = [r for r in rubrics if r.reward is not None]
    advantages = group_advantages([r.reward for r in scored if r.reward is not None])
    for r, advantage in zip(scored, advantages, strict=True):
        r.advantage = advantage


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
