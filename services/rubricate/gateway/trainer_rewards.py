"""`POST /get_reward`: one scalar reward per sample for trainers (OpenRLHF, veRL, TRL).

Each sample's reward kind comes from its label (`kind`), else the request's `kind`, else the
gateway setting `reward_kind`. A kind is a handler over the samples of that kind which calls
the kind's public endpoint in process (`RouteInvoker`), so it shares that endpoint's service
object, validation and errors. A sample the platform could not score gets reward 0.0 with
`rubricate/scored` = 0 in `extra_logs` (a flagged fallback, never a silent zero); a batch that
is invalid fails as a whole with the API's 4xx error shape.
"""

import asyncio
import json
import logging
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from rubricate.common.errors import ServiceError
from rubricate.common.tenancy import TENANT_HEADER
from rubricate.core.constants import STAGES
from rubricate.core.errors import DomainError
from rubricate.core.rubrics import Stage
from rubricate.gateway.invoke import RouteInvoker
from rubricate.gateway.nugget_schemas import NuggetVerifyBatchRequest, NuggetVerifyBatchResponse
from rubricate.gateway.schemas import Rollout, StagewiseScoreRequest, StagewiseScoreResponse
from rubricate.gateway.step_schemas import ScoreRequest, ScoreResponse
from rubricate.gateway.trainer_schemas import (
    GetRewardRequest,
    GetRewardResponse,
    RewardKind,
    RewardLabel,
)

log = logging.getLogger("rubricate.gateway.rewards")

SCORED_LOG = "rubricate/scored"
FALLBACK_LOG = "rubricate/fallback"


@dataclass
class Sample:
    index: int
    prompt: str
    response: str
    label: RewardLabel


@dataclass
class SampleResult:
    reward: float | None
    """None: the platform could not score this sample."""
    fallback: bool = False
    logs: dict[str, float] = field(default_factory=dict)


@dataclass
class KindContext:
    invoker: RouteInvoker
    headers: dict[str, str]
    request_id: str | None
    group_concurrency: int


KindHandler = Callable[[Sequence[Sample], KindContext], Awaitable[list[SampleResult]]]


# ---------------------------------------------------------------- stagewise answer score


async def stagewise_rewards(samples: Sequence[Sample], ctx: KindContext) -> list[SampleResult]:
    """R_answer of each sample, scored with the other samples of its question as one group."""
    groups: dict[str, list[int]] = {}
    for pos, sample in enumerate(samples):
        key = sample.label.question_id or _question(sample)
        groups.setdefault(key, []).append(pos)
    results: list[SampleResult | None] = [None] * len(samples)
    gate = asyncio.Semaphore(ctx.group_concurrency)

    async def one(positions: list[int]) -> None:
        async with gate:
            members = [samples[p] for p in positions]
            for pos, result in zip(positions, await _score_group(members, ctx), strict=True):
                results[pos] = result

    await asyncio.gather(*(one(p) for p in groups.values()))
    return [r if r is not None else SampleResult(reward=None) for r in results]


async def _score_group(members: Sequence[Sample], ctx: KindContext) -> list[SampleResult]:
    first = members[0]
    scorable = [s for s in members if s.response.strip()]
    out: dict[int, SampleResult] = {
        s.index: SampleResult(reward=0.0, logs=_stage_logs(None))
        for s in members
        if not s.response.strip()  # an empty response has no answer: R = 0, scored
    }
    if scorable:
        rubrics = next((s.label.rubrics for s in members if s.label.rubrics), [])
        steps = [s.label.step for s in members if s.label.step is not None]
        try:
            request = StagewiseScoreRequest(
                question=_question(first),
                question_id=first.label.question_id,
                rollouts=[Rollout(id=str(s.index), trajectory=s.response) for s in scorable],
                persistent_rubrics=rubrics,
                step=max(steps) if steps else None,
            )
        except ValidationError as exc:
            err = exc.errors()[0]
            field = _sample_field(tuple(err["loc"]), first=first, rollouts=scorable)
            raise DomainError(str(err["msg"]), field=field) from exc
        try:
            response: StagewiseScoreResponse = await ctx.invoker.call(
                "POST",
                "/v1/stagewise/score",
                body=request,
                headers=ctx.headers,
                request_id=ctx.request_id,
            )
        except DomainError as exc:
            loc = tuple(int(p) if p.isdigit() else p for p in re.findall(r"\w+", exc.field or ""))
            raise DomainError(
                exc.message, field=_sample_field(loc, first=first, rollouts=scorable)
            ) from exc
        except ServiceError as exc:
            if exc.status_code < 500:
                raise
            log.warning(
                "rewards.group_unscored question=%.60s error=%s",
                first.label.question_id or _question(first),
                exc.message,
            )
            for s in scorable:
                out[s.index] = SampleResult(reward=None, logs=_stage_logs(None))
        else:
            by_id = {r.id: r for r in response.rollouts}
            for s in scorable:
                rollout = by_id[str(s.index)]
                scores = rollout.scores
                out[s.index] = SampleResult(
                    reward=None if scores is None else scores["answer"],
                    fallback=rollout.fallback is not None
                    and rollout.fallback.kind == "answer_only",
                    logs=_stage_logs(scores),
                )
    return [out[s.index] for s in members]


_LABEL_FIELDS = {"persistent_rubrics": "rubrics"}


def _sample_field(loc: tuple[int | str, ...], *, first: Sample, rollouts: Sequence[Sample]) -> str:
    """A stagewise request's field as the `/get_reward` field it came from:
    `rollouts[2].trajectory` -> `query[<sample>]`,
    `persistent_rubrics[0]` -> `labels[<first sample>].rubrics[0]`."""
    if (
        len(loc) >= 2
        and loc[0] == "rollouts"
        and isinstance(loc[1], int)
        and loc[1] < len(rollouts)
    ):
        return f"query[{rollouts[loc[1]].index}]"
    if loc[:1] == ("rollouts",):
        return "query"
    head = _LABEL_FIELDS.get(str(loc[0]), str(loc[0])) if loc else ""
    rest = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc[1:])
    return f"labels[{first.index}].{head}{rest}" if head else f"labels[{first.index}]"


def _stage_logs(scores: Mapping[Stage, float] | None) -> dict[str, float]:
    return {f"rubricate/R_{s}": (scores or {}).get(s, 0.0) for s in STAGES}


def _question(sample: Sample) -> str:
    question = sample.label.question or sample.prompt.strip()
    if not question:
        raise DomainError(
            "no question for this sample: put it in the label's `question` or send the prompt",
            field=f"labels[{sample.index}].question",
        )
    return question


# ---------------------------------------------------------------- nugget reward


async def nugget_rewards(samples: Sequence[Sample], ctx: KindContext) -> list[SampleResult]:
    """Search-Gen-V nugget reward of each response against the nuggets in its label, all
    samples in one `/v1/nuggets/verify-batch` call; a failed item is unscored, not 0."""
    items = []
    for s in samples:
        if not s.label.nuggets:
            raise DomainError(
                "the nugget reward needs the label's `nuggets`",
                field=f"labels[{s.index}].nuggets",
            )
        items.append(
            {
                "question": _question(s),
                "answer": s.response,
                "nuggets": [n if isinstance(n, dict) else {"text": n} for n in s.label.nuggets],
                "mode": s.label.nugget_mode or "long",
            }
        )
    try:
        request = NuggetVerifyBatchRequest.model_validate({"items": items})
    except ValidationError as exc:
        loc = exc.errors()[0]["loc"]
        index = samples[int(loc[1])].index if len(loc) > 1 else samples[0].index
        rest = loc[2:]
        if rest[:1] == ("answer",):
            field = f"query[{index}]"
        else:
            field = f"labels[{index}]" + "".join(
                f"[{p}]" if isinstance(p, int) else f".{p}" for p in rest
            )
        raise DomainError(str(exc.errors()[0]["msg"]), field=field) from exc
    response: NuggetVerifyBatchResponse = await ctx.invoker.call(
        "POST",
        "/v1/nuggets/verify-batch",
        body=request,
        headers=ctx.headers,
        request_id=ctx.request_id,
    )
    return [SampleResult(reward=reward) for reward in response.rewards]


# ---------------------------------------------------------------- step reward


async def step_rewards(samples: Sequence[Sample], ctx: KindContext) -> list[SampleResult]:
    """The mean step-rubric score of each response's steps (Co-ReAct weighted satisfied
    fraction per step, `/v1/steps/score`); steps that could not be verified are left out, and
    a response with no verified step is unscored."""
    gate = asyncio.Semaphore(ctx.group_concurrency)

    async def one(sample: Sample) -> SampleResult:
        if not sample.response.strip():
            return SampleResult(reward=0.0, logs={"rubricate/steps": 0.0})
        try:
            request = ScoreRequest(
                question=_question(sample),
                trajectory=sample.response,
                outcome=1.0 if sample.label.outcome is None else sample.label.outcome,
            )
        except ValidationError as exc:
            err = exc.errors()[0]
            raise DomainError(
                str(err["msg"]), field=f"labels[{sample.index}]." + ".".join(map(str, err["loc"]))
            ) from exc
        async with gate:
            try:
                response: ScoreResponse = await ctx.invoker.call(
                    "POST",
                    "/v1/steps/score",
                    body=request,
                    headers=ctx.headers,
                    request_id=ctx.request_id,
                )
            except ServiceError as exc:
                if exc.status_code < 500:
                    raise
                log.warning("rewards.steps_unscored error=%s", exc.message)
                return SampleResult(reward=None, logs={"rubricate/steps": 0.0})
        scores = [step.score for step in response.steps if step.score is not None]
        return SampleResult(
            reward=sum(scores) / len(scores) if scores else None,
            logs={"rubricate/steps": float(len(response.steps))},
        )

    return list(await asyncio.gather(*(one(s) for s in samples)))


# ---------------------------------------------------------------- the kinds and the batch


REWARD_KINDS: dict[RewardKind, KindHandler] = {
    "stagewise": stagewise_rewards,
    "nugget": nugget_rewards,
    "step": step_rewards,
}
"""The reward kinds this gateway serves; the others answer 400 `unsupported_reward_kind`."""


class TrainerRewards:
    def __init__(
        self,
        *,
        invoker: RouteInvoker,
        default_kind: RewardKind,
        group_concurrency: int = 8,
        kinds: Mapping[RewardKind, KindHandler] | None = None,
    ) -> None:
        self.invoker = invoker
        self.default_kind = default_kind
        self.group_concurrency = group_concurrency
        self.kinds = dict(REWARD_KINDS if kinds is None else kinds)

    async def get_reward(
        self, body: GetRewardRequest, *, tenant: str, request_id: str | None = None
    ) -> GetRewardResponse:
        n = len(body.query)
        prompts = body.prompts or [""] * n
        labels = body.labels or [None] * n
        if len(prompts) != n:
            raise DomainError(f"{len(prompts)} prompts for {n} queries", field="prompts")
        if len(labels) != n:
            raise DomainError(f"{len(labels)} labels for {n} queries", field="labels")
        by_kind: dict[RewardKind, list[Sample]] = {}
        for i, (query, prompt, raw) in enumerate(zip(body.query, prompts, labels, strict=True)):
            label = parse_label(raw, index=i)
            kind = label.kind or body.kind or self.default_kind
            if kind not in self.kinds:
                raise ServiceError(
                    400,
                    f"reward kind {kind!r} is not available on this gateway "
                    f"(available: {', '.join(sorted(self.kinds))})",
                    type="unsupported_reward_kind",
                    field=f"labels[{i}].kind" if label.kind else "kind",
                )
            sample = Sample(
                index=i, prompt=prompt, response=strip_prompt(query, prompt), label=label
            )
            by_kind.setdefault(kind, []).append(sample)

        ctx = KindContext(
            invoker=self.invoker,
            headers={TENANT_HEADER: tenant},
            request_id=request_id,
            group_concurrency=self.group_concurrency,
        )
        results: list[SampleResult | None] = [None] * n
        for kind, samples in by_kind.items():
            for sample, result in zip(samples, await self.kinds[kind](samples, ctx), strict=True):
                results[sample.index] = result
        return _response([r or SampleResult(reward=None) for r in results])


def _response(results: Sequence[SampleResult]) -> GetRewardResponse:
    rewards = [0.0 if r.reward is None else r.reward for r in results]
    keys = sorted({k for r in results for k in r.logs})
    logs: dict[str, list[float]] = {
        SCORED_LOG: [0.0 if r.reward is None else 1.0 for r in results],
        FALLBACK_LOG: [1.0 if r.fallback else 0.0 for r in results],
    }
    for key in keys:
        logs[key] = [r.logs.get(key, 0.0) for r in results]
    return GetRewardResponse(rewards=rewards, scores=list(rewards), extra_logs=logs)


def parse_label(raw: str | dict[str, Any] | None, *, index: int) -> RewardLabel:
    """A label is a JSON object (as text or decoded); any other text is a `reference`."""
    data: Any = raw
    if isinstance(raw, str):
        try:
            data = json.loads(raw)
        except ValueError:
            data = None
        if not isinstance(data, dict):
            return RewardLabel(reference=raw)
    if data is None:
        return RewardLabel()
    try:
        return RewardLabel.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"])
        raise DomainError(str(err["msg"]), field=f"labels[{index}]{path}") from exc


def strip_prompt(query: str, prompt: str) -> str:
    """The response part of `query` (= prompt + response)."""
    if not prompt:
        return query
    if query.startswith(prompt):
        return query[len(prompt) :]
    at = query.find(prompt)
    if at >= 0:
        return query[at + len(prompt) :]
    log.warning("rewards.prompt_not_in_query prompt_chars=%d", len(prompt))
    return query
