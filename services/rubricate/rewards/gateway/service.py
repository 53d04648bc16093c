"""`POST /get_reward`: one scalar reward per sample for trainers (OpenRLHF, veRL, TRL).

Each sample's reward kind comes from its label (`kind`), else the request's `kind`, else the
gateway setting `reward_kind`. A kind is a handler over the samples of that kind which calls
the capability's service object through a typed function (`RewardCapabilities`, injected by
the gateway's assembly), the same call the kind's public route makes, so it shares that
route's validation and errors. A sample the platform could not score gets reward null with
`rubricate/scored` = 0 in `extra_logs` (never a 0.0 a trainer would train on; the adapters
turn it into what each trainer can take, see docs/gateway.md, "Failures are never rewards");
a batch that is invalid fails as a whole with the API's 4xx error shape. A group that was
not scored because a service could not be reached (a 503: a model server restarting) is not
a sample the platform could not score: the request fails with that retryable 503 (trainers
retry an error, not a 200 with nulls) and the retry scores the group again
(`common.rendezvous` keeps a failed group's samples).

Stagewise samples go through group assembly (`rewards.gateway.assembly`): the samples of one
group are scored once, together, whichever requests they came in, and a sample sent again is
answered from its first result. Every response has the same `extra_logs` keys (`LOG_KEYS`)
whatever the kinds of its samples (veRL builds its arrays from the first sample's keys).
"""

import asyncio
import json
import logging
import re
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from rubricate.common.errors import ServiceError
from rubricate.common.metrics import FALLBACKS
from rubricate.common.rendezvous import Batch, Scored
from rubricate.rewards.gateway.assembly import GroupAssembler, GroupMember, content_key, group_id
from rubricate_client.constants import SCORE_MAX, STAGES
from rubricate_client.errors import DomainError
from rubricate_client.schemas.nuggets import NuggetVerifyBatchRequest, NuggetVerifyBatchResponse
from rubricate_client.schemas.rewards import (
    COMPONENT_ORDER,
    KIND_COMPONENTS,
    GetRewardRequest,
    GetRewardResponse,
    RewardComponent,
    RewardKind,
    RewardLabel,
    RubricScore,
)
from rubricate_client.schemas.rubrics import Judgment, Stage
from rubricate_client.schemas.stagewise import (
    Integrity,
    Rollout,
    RubricOut,
    StagewiseScoreRequest,
    StagewiseScoreResponse,
)
from rubricate_client.schemas.steps import ScoreRequest, ScoreResponse

log = logging.getLogger("rubricate.gateway.rewards")

SCORED_LOG = "rubricate/scored"
FALLBACK_LOG = "rubricate/fallback"
STEPS_LOG = "rubricate/steps"
PARTIAL_LOG = "rubricate/partial_group"
"""1.0 where the sample's stagewise group was scored before all its samples arrived."""
GROUP_SIZE_LOG = "rubricate/group_size"
"""How many samples the sample's stagewise group was scored with (0.0 for other kinds)."""
STAGE_LOGS = tuple(f"rubricate/R_{s}" for s in STAGES)
REFUSED_CREDIT_LOG = "rubricate/refused_credit"
"""The R_answer a stagewise sample's refused verdicts would have added (issue 32)."""
REFUSED_VERDICTS_LOG = "rubricate/refused_verdicts"
LOG_KEYS = (
    SCORED_LOG,
    FALLBACK_LOG,
    *STAGE_LOGS,
    STEPS_LOG,
    PARTIAL_LOG,
    GROUP_SIZE_LOG,
    REFUSED_CREDIT_LOG,
    REFUSED_VERDICTS_LOG,
)
"""The `extra_logs` keys of every `/get_reward` response, whatever its samples' kinds."""

NO_QUESTION = "(no question given: judge the answer against the nuggets)"
"""The nugget reward's question when neither the label nor the prompt gives one (the nugget
labels are judged from the answer; the question is context)."""


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
    components: dict[str, float | None] = field(default_factory=dict)
    """The reward's components (`KIND_COMPONENTS` of the sample's kind); None where the
    sample has no such score (unscored, a stage not judged), never 0.0 for a missing one."""
    rubrics: list[RubricScore] = field(default_factory=list)
    """Per-rubric (or per-nugget) scores, ordered by stage then rubric id (nuggets in label
    order); kept always, returned when the request asks (`rubric_scores`)."""


def outage(exc: ServiceError) -> bool:
    """A scoring that failed because a service was unavailable (503, Retry-After: a model
    server that could not be reached): the caller gets the error and retries, never a null."""
    return exc.status_code == 503


def _unscored(logs: Mapping[str, float], kind: RewardKind = "stagewise") -> SampleResult:
    """A sample the platform could not score: a null reward and null components."""
    return SampleResult(
        reward=None,
        logs=dict(logs),
        components=dict.fromkeys(KIND_COMPONENTS[kind]),
    )


@dataclass(frozen=True)
class RewardCapabilities:
    """What `/get_reward` calls: the functions behind the public routes of the kinds it
    serves, bound to the gateway's service objects."""

    score_stagewise: Callable[[StagewiseScoreRequest, str], Awaitable[StagewiseScoreResponse]]
    """`POST /v1/stagewise/score` for a tenant."""
    verify_nuggets: Callable[[NuggetVerifyBatchRequest, str], Awaitable[NuggetVerifyBatchResponse]]
    """`POST /v1/nuggets/verify-batch` for a tenant."""
    score_steps: Callable[[ScoreRequest, str], Awaitable[ScoreResponse]]
    """`POST /v1/steps/score` for a tenant."""


@dataclass
class KindContext:
    capabilities: RewardCapabilities
    group_concurrency: int
    tenant: str = "default"
    assembler: GroupAssembler | None = None
    """Gathers stagewise groups across requests; None: each request's samples of a question
    are one group."""
    group_size: int | None = None
    """Expected group size when a label has no `group_size`."""
    max_trajectory_chars: int | None = None
    """The gateway's trajectory limit, checked before a sample joins a group shared with other
    requests (one sample over it must fail its own request, not null the whole group)."""


KindHandler = Callable[[Sequence[Sample], KindContext], Awaitable[list[SampleResult]]]


# ---------------------------------------------------------------- stagewise answer score


async def stagewise_rewards(samples: Sequence[Sample], ctx: KindContext) -> list[SampleResult]:
    """R_answer of each sample, scored with the other samples of its group as one group."""
    if ctx.assembler is not None:
        return await _assembled_rewards(samples, ctx, ctx.assembler)
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


async def _assembled_rewards(
    samples: Sequence[Sample], ctx: KindContext, assembler: GroupAssembler
) -> list[SampleResult]:
    """The samples joined to their groups (`rewards.gateway.assembly`); each group is scored
    once by whichever request opened it, under that request's group concurrency."""
    by_group: dict[str, list[Sample]] = {}
    members: list[GroupMember] = []
    for sample in samples:
        member = group_member(sample, tenant=ctx.tenant, group_size=ctx.group_size)
        by_group.setdefault(member.group, []).append(sample)
        members.append(member)
    limit = ctx.max_trajectory_chars
    for sample in samples:  # a bad sample fails its own request, up front
        if limit is not None and len(sample.response) > limit:
            raise DomainError(
                f"trajectory longer than {limit} characters", field=f"query[{sample.index}]"
            )
    for group_samples in by_group.values():
        scorable = [s for s in group_samples if s.response.strip()]
        if scorable:
            _stagewise_request(group_samples, scorable)
    gate = asyncio.Semaphore(ctx.group_concurrency)

    async def score(batch: Batch) -> list[Scored]:
        group = [
            _sample_from(p, slot=None if batch.private else i) for i, p in enumerate(batch.payloads)
        ]
        async with gate:
            if batch.private:
                results = await _score_group(group, ctx)
            else:
                try:
                    results = await _score_group(group, ctx)
                except (DomainError, ServiceError) as exc:  # a group of several requests
                    if isinstance(exc, ServiceError) and outage(exc):
                        raise  # every caller gets it; a retry scores the group again
                    log.warning(
                        "rewards.group_unscored question=%.60s error=%s",
                        group[0].label.question_id or _question(group[0]),
                        exc,
                    )
                    results = [_unscored(_stage_logs(None)) for _ in group]
        size = len(group)
        partial = size < batch.expected
        if partial:
            log.warning(
                "rewards.partial_group question=%.60s scored=%d expected=%d",
                group[0].label.question_id or _question(group[0]),
                size,
                batch.expected,
            )
        for result in results:
            result.logs[PARTIAL_LOG] = 1.0 if partial else 0.0
            result.logs[GROUP_SIZE_LOG] = float(size)
        # an unscored sample's retry is scored again; a scored one is answered from here
        return [Scored(_dump_result(r), keep=r.reward is not None) for r in results]

    return [_load_result(text) for text in await assembler.assemble(members, score=score)]


def group_member(sample: Sample, *, tenant: str, group_size: int | None) -> GroupMember:
    """A stagewise sample as a member of its group: the group, its content key (for retries)
    and what the group's scorer needs of it."""
    label = sample.label
    label_json = label.model_dump(mode="json", exclude_none=True)
    payload = {
        "index": sample.index,
        "prompt": sample.prompt,
        "response": sample.response,
        "label": label_json,
    }
    return GroupMember(
        group=group_id(
            tenant=tenant,
            question=_question(sample),
            question_id=label.question_id,
            step=label.step,
            group_key=label.group_key,
        ),
        key=content_key(
            tenant=tenant,
            kind="stagewise",
            prompt=sample.prompt,
            query=sample.response,
            label=label_json,
        ),
        payload=json.dumps(payload),
        expected=label.group_size or group_size,
    )


def _sample_from(payload: str, *, slot: int | None) -> Sample:
    """A group member back from its payload; `slot` is its index in a group gathered from
    several requests (their own indices repeat), None for a group of one request."""
    data = json.loads(payload)
    return Sample(
        index=int(data["index"]) if slot is None else slot,
        prompt=str(data["prompt"]),
        response=str(data["response"]),
        label=RewardLabel.model_validate(data["label"]),
    )


def _dump_result(result: SampleResult) -> str:
    return json.dumps(
        {
            "reward": result.reward,
            "fallback": result.fallback,
            "logs": result.logs,
            "components": result.components,
            "rubrics": [r.model_dump(mode="json") for r in result.rubrics],
        }
    )


def _load_result(text: str) -> SampleResult:
    data = json.loads(text)
    reward = data["reward"]
    return SampleResult(
        reward=None if reward is None else float(reward),
        fallback=bool(data["fallback"]),
        logs={str(k): float(v) for k, v in data["logs"].items()},
        # a result stored by a gateway without components: every component unknown (null)
        components={
            str(k): None if v is None else float(v)
            for k, v in data.get("components", dict.fromkeys(KIND_COMPONENTS["stagewise"])).items()
        },
        rubrics=[RubricScore.model_validate(r) for r in data.get("rubrics", [])],
    )


def _stagewise_request(
    members: Sequence[Sample], scorable: Sequence[Sample]
) -> StagewiseScoreRequest:
    first = members[0]
    rubrics = next((s.label.rubrics for s in members if s.label.rubrics), [])
    steps = [s.label.step for s in members if s.label.step is not None]
    try:
        return StagewiseScoreRequest(
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


async def _score_group(members: Sequence[Sample], ctx: KindContext) -> list[SampleResult]:
    first = members[0]
    scorable = [s for s in members if s.response.strip()]
    out: dict[int, SampleResult] = {
        # an empty response has no answer and no stage: R = 0 on every stage, scored
        s.index: SampleResult(
            reward=0.0,
            logs=_stage_logs(None),
            components=dict.fromkeys(KIND_COMPONENTS["stagewise"], 0.0),
        )
        for s in members
        if not s.response.strip()
    }
    if scorable:
        request = _stagewise_request(members, scorable)
        try:
            response = await ctx.capabilities.score_stagewise(request, ctx.tenant)
        except DomainError as exc:
            loc = tuple(int(p) if p.isdigit() else p for p in re.findall(r"\w+", exc.field or ""))
            raise DomainError(
                exc.message, field=_sample_field(loc, first=first, rollouts=scorable)
            ) from exc
        except ServiceError as exc:
            if exc.status_code < 500 or outage(exc):
                raise
            log.warning(
                "rewards.group_unscored question=%.60s error=%s",
                first.label.question_id or _question(first),
                exc.message,
            )
            for s in scorable:
                out[s.index] = _unscored(_stage_logs(None))
        else:
            by_id = {r.id: r for r in response.rollouts}
            rubric_set = sorted(
                (r for rubrics in response.rubrics.values() for r in rubrics),
                key=lambda r: (STAGES.index(r.stage), r.id),
            )
            for s in scorable:
                rollout = by_id[str(s.index)]
                scores = rollout.scores
                answer_only = (
                    rollout.fallback is not None and rollout.fallback.kind == "answer_only"
                )
                out[s.index] = SampleResult(
                    reward=None if scores is None else scores.get("answer"),
                    fallback=answer_only,
                    logs=_stage_logs(scores) | _integrity_logs(rollout.integrity),
                    components=_stage_components(scores, answer_only=answer_only),
                    # an unscored sample has no rubric scores, as when its whole group failed
                    rubrics=[] if scores is None else _rubric_scores(rubric_set, rollout.judgments),
                )
    return [out[s.index] for s in members]


def _stage_components(
    scores: Mapping[Stage, float | None] | None, *, answer_only: bool
) -> dict[str, float | None]:
    """R_plan … R_answer as the platform scored them; None for a stage with no judgment: the
    whole sample unscored, a stage with no rubric, and every stage but the answer of an
    answer-only fallback (whose stage scores are the answer's, broadcast for the advantage
    math, not judgments of those stages). A stage the trajectory lacks keeps the score the
    platform gives a missing stage (`missing_stage_score`, 0.0): that is a rule, not a
    failure."""
    out: dict[str, float | None] = {}
    for stage in STAGES:
        value = None if scores is None else scores.get(stage)
        if answer_only and stage != "answer":
            value = None
        out[f"R_{stage}"] = value
    return out


def _rubric_scores(
    rubric_set: Sequence[RubricOut], judgments: Sequence[Judgment]
) -> list[RubricScore]:
    """Every rubric of the group's set scored on one rollout, in the set's order; None
    where the rubric was not judged on it."""
    judged = {j.rubric_id: j for j in judgments}
    out = []
    for rubric in rubric_set:
        j = judged.get(rubric.id)
        score = None
        if j is not None:
            value = j.value if rubric.polarity == "positive" else SCORE_MAX - j.value
            score = value / SCORE_MAX
        out.append(
            RubricScore(
                id=rubric.id,
                stage=rubric.stage,
                title=rubric.title,
                weight=float(rubric.weight),
                polarity=rubric.polarity,
                score=score,
            )
        )
    return out


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


def _integrity_logs(integrity: Integrity | None) -> dict[str, float]:
    """Diagnostics: the answer's refused credit (`rubricate/refused_credit`, the R_answer
    its text tried to get without asserting it) and refused verdicts; 0.0 where none."""
    if integrity is None:
        return {}
    return {
        REFUSED_CREDIT_LOG: integrity.refused_credit,
        REFUSED_VERDICTS_LOG: float(integrity.refused_verdicts),
    }


def _stage_logs(scores: Mapping[Stage, float | None] | None) -> dict[str, float]:
    """Diagnostics only (never the reward): 0.0 where a stage has no score."""
    return {f"rubricate/R_{s}": (scores or {}).get(s) or 0.0 for s in STAGES}


def _question(sample: Sample) -> str:
    question = (sample.label.question or "").strip() or sample.prompt.strip()
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
                "question": (s.label.question or "").strip() or s.prompt.strip() or NO_QUESTION,
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
    response = await ctx.capabilities.verify_nuggets(request, ctx.tenant)
    out = []
    for reward, item in zip(response.rewards, response.items, strict=True):
        nuggets = [] if item.result is None else item.result.nuggets
        out.append(
            SampleResult(
                reward=reward,
                components={"nugget": reward},
                rubrics=[
                    RubricScore(
                        id=f"nugget-{n.index}",
                        title=n.text,
                        weight=n.weight,
                        score=n.value,
                    )
                    for n in nuggets
                ],
            )
        )
    return out


# ---------------------------------------------------------------- step reward


async def step_rewards(samples: Sequence[Sample], ctx: KindContext) -> list[SampleResult]:
    """The mean step-rubric score of each response's steps (Co-ReAct weighted satisfied
    fraction per step, `/v1/steps/score`); steps that could not be verified are left out, and
    a response with no verified step is unscored."""
    gate = asyncio.Semaphore(ctx.group_concurrency)

    async def one(sample: Sample) -> SampleResult:
        if not sample.response.strip():
            return SampleResult(reward=0.0, logs={STEPS_LOG: 0.0}, components={"step": 0.0})
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
                response = await ctx.capabilities.score_steps(request, ctx.tenant)
            except ServiceError as exc:
                if exc.status_code < 500:
                    raise
                log.warning("rewards.steps_unscored error=%s", exc.message)
                return _unscored({STEPS_LOG: 0.0}, "step")
        scores = [step.score for step in response.steps if step.score is not None]
        reward = sum(scores) / len(scores) if scores else None
        return SampleResult(
            reward=reward,
            logs={STEPS_LOG: float(len(response.steps))},
            components={"step": reward},
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
        capabilities: RewardCapabilities,
        default_kind: RewardKind,
        group_concurrency: int = 8,
        kinds: Mapping[RewardKind, KindHandler] | None = None,
        assembler: GroupAssembler | None = None,
        group_size: int | None = None,
        max_trajectory_chars: int | None = None,
    ) -> None:
        self.max_trajectory_chars = max_trajectory_chars
        self.capabilities = capabilities
        self.default_kind = default_kind
        self.group_concurrency = group_concurrency
        self.kinds = dict(REWARD_KINDS if kinds is None else kinds)
        self.assembler = assembler
        self.group_size = group_size

    async def get_reward(self, body: GetRewardRequest, *, tenant: str) -> GetRewardResponse:
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
            capabilities=self.capabilities,
            group_concurrency=self.group_concurrency,
            tenant=tenant,
            assembler=self.assembler,
            group_size=self.group_size,
            max_trajectory_chars=self.max_trajectory_chars,
        )
        results: list[SampleResult | None] = [None] * n
        outcomes = await asyncio.gather(
            *(self.kinds[kind](samples, ctx) for kind, samples in by_kind.items())
        )
        for samples, kind_results in zip(by_kind.values(), outcomes, strict=True):
            for sample, result in zip(samples, kind_results, strict=True):
                results[sample.index] = result
        return _response(
            [r or SampleResult(reward=None) for r in results],
            kinds=set(by_kind),
            rubric_scores=body.rubric_scores,
        )


def _response(
    results: Sequence[SampleResult],
    *,
    kinds: Collection[RewardKind] = (),
    rubric_scores: bool = False,
) -> GetRewardResponse:
    rewards = [r.reward for r in results]
    unscored = sum(1 for r in rewards if r is None)
    if unscored:
        FALLBACKS.labels("sample_unscored").inc(unscored)
    logs: dict[str, list[float]] = {
        SCORED_LOG: [0.0 if r.reward is None else 1.0 for r in results],
        FALLBACK_LOG: [1.0 if r.fallback else 0.0 for r in results],
    }
    extra = sorted({k for r in results for k in r.logs} - set(LOG_KEYS))
    for key in [*LOG_KEYS[2:], *extra]:  # every key for every sample: 0.0 where it has none
        logs[key] = [r.logs.get(key, 0.0) for r in results]
    names = {n for kind in kinds for n in KIND_COMPONENTS[kind]}
    components = [
        RewardComponent(name=name, values=[r.components.get(name) for r in results])
        for name in COMPONENT_ORDER
        if name in names
    ]
    return GetRewardResponse(
        rewards=rewards,
        scores=list(rewards),
        extra_logs=logs,
        components=components,
        rubric_scores=[list(r.rubrics) for r in results] if rubric_scores else None,
    )


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
