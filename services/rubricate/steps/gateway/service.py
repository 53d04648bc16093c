"""Orchestration of the step-level endpoints (Co-ReAct §3.3, App. A; ARCO).

- segment: core only.
- rubric: one step-rubric call (rubric-generator); weights normalized and rendered (core).
- verify: one step-verdicts call (verifier); weighted fraction, pass and feedback (core).
- score: per step, a rubric (given or generated for h_t) and a verdicts call on the step's
  action; the outcome decomposed over the steps (core). A step whose calls fail after retries
  is flagged and left out of the decomposition; if every step fails the request fails.
The listwise reward and multi-judge ranking live in `gateway/ranking.py` (`self.ranking`).
Each request opens one `request_context`: its model-server calls (`ServiceClient.call` of the
`steps.verifier.endpoints`, `steps.generator.endpoints` tasks) count their wait and LLM usage to it.

Material that addresses the judge (GitHub issue 25) is found and withheld by the verifier;
its markers are copied into the public responses (`judge_addressing`) and, with a tenant
and the audit on, handed to the audit (`AddressingReporter`).
"""

import asyncio
import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from rubricate.common.addressing import AddressingReporter, hand_over
from rubricate.common.metrics import FALLBACKS
from rubricate.common.request_context import request_context
from rubricate.common.upstream import ServiceClient, UpstreamError, Upstreams
from rubricate.common.usage import usage_out
from rubricate.steps.domain.rewards import (
    Criterion,
    StepRewards,
    Verdict,
    decompose_outcome,
    make_rubric,
    passes,
    render_rubric,
    retry_feedback,
    weighted_fraction,
)
from rubricate.steps.domain.segmentation import (
    ChatMessage,
    Segmentation,
    ToolCall,
    render_messages,
    segment_messages,
    segment_steps,
    segment_text,
)
from rubricate.steps.gateway.ranking import RankingService
from rubricate.steps.gateway.shared import judge_unavailable, step_verdicts, timing_since
from rubricate.steps.generator.endpoints import STEP_RUBRIC
from rubricate.steps.generator.schemas import StepRubricTaskRequest
from rubricate_client.constants import STEP_MAX_RETRIES
from rubricate_client.errors import DomainError
from rubricate_client.schemas.audit import AddressingReport
from rubricate_client.schemas.steps import (
    CriterionOut,
    MessageIn,
    ScoredStep,
    ScoreRequest,
    ScoreResponse,
    SegmentRequest,
    SegmentResponse,
    StepOut,
    StepRubricIn,
    StepRubricOut,
    StepRubricRequest,
    StepRubricResponse,
    Trajectory,
    VerdictOut,
    VerifyRequest,
    VerifyResponse,
)

log = logging.getLogger("rubricate.steps.gateway.service")


class StepSettings(BaseSettings):
    """Gateway settings of the step endpoints (env prefix RUBRICATE_GATEWAY_STEPS_)."""

    model_config = SettingsConfigDict(env_prefix="RUBRICATE_GATEWAY_STEPS_", extra="ignore")

    concurrency: int = Field(default=8, ge=1)
    """Model-server calls in flight per request."""
    max_steps: int = Field(default=64, ge=1)
    """Most steps `/v1/steps/score` accepts in one trajectory."""
    judge_urls: list[str] = Field(default_factory=list)
    """Verifier-compatible servers used as rank judges in turn (e.g. one per model family);
    empty: every judge is a sample of the verifier."""
    rank_temperature: float = Field(default=0.7, ge=0.0, le=2.0)
    """Sampling temperature of each rank judge unless the request sets one."""


class StepLimits(Protocol):
    """What the step orchestration reads of its service's settings (the gateway's)."""

    @property
    def model_timeout_s(self) -> float: ...
    @property
    def upstream_retries(self) -> int: ...
    @property
    def max_trajectory_chars(self) -> int: ...


class StepsService:
    def __init__(
        self,
        *,
        upstreams: Upstreams,
        settings: StepSettings,
        gateway: StepLimits,
        audit: AddressingReporter | None = None,
    ) -> None:
        self.up = upstreams
        self.audit = audit
        self.settings = settings
        self.gateway = gateway
        self._own_judges = [
            ServiceClient(
                service=f"judge-{i}",
                base_url=url,
                timeout_s=gateway.model_timeout_s,
                retries=gateway.upstream_retries,
            )
            for i, url in enumerate(settings.judge_urls)
        ]
        self.ranking = RankingService(
            verifier=upstreams.verifier,
            history=self.history,
            judges=self._own_judges or [upstreams.verifier],
            concurrency=settings.concurrency,
            rank_temperature=settings.rank_temperature,
            audit=audit,
        )

    async def aclose(self) -> None:
        for client in self._own_judges:
            await client.aclose()

    # --- segmentation ---------------------------------------------------------------------

    def _text_limit(self, text: str, field: str) -> None:
        if len(text) > self.gateway.max_trajectory_chars:
            raise DomainError(
                f"longer than {self.gateway.max_trajectory_chars} characters", field=field
            )

    def _segment(self, trajectory: Trajectory, *, field: str = "trajectory") -> Segmentation:
        if isinstance(trajectory, str):
            if not trajectory.strip():
                raise DomainError("must not be empty or whitespace", field=field)
            self._text_limit(trajectory, field)
            seg = segment_text(trajectory)
        else:
            seg = segment_messages([message_to_core(m) for m in trajectory])
            self._text_limit(seg.text, field)
        if not seg.steps:
            raise DomainError("holds no step (no tool call and no answer)", field=field)
        return seg

    def history(self, history: Trajectory) -> str:
        text = (
            history
            if isinstance(history, str)
            else render_messages([message_to_core(m) for m in history])
        )
        self._text_limit(text, "history")
        return text

    def segment(self, request: SegmentRequest) -> SegmentResponse:
        seg = self._segment(request.trajectory)
        return SegmentResponse(
            markup=seg.markup,
            rendered=None if isinstance(request.trajectory, str) else seg.text,
            prompt_messages=seg.prompt_messages,
            steps=[_step_out(seg, i) for i in range(len(seg.steps))],
        )

    # --- rubric and verification ----------------------------------------------------------

    async def _generate(
        self,
        *,
        question: str,
        history: str,
        k: int,
        temperature: float | None = None,
        seed: int | None = None,
    ) -> list[Criterion]:
        """One step-rubric call (the generator); its wait and usage count to the request's
        context."""
        body = StepRubricTaskRequest(
            question=question, history=history, k=k, temperature=temperature, seed=seed
        )
        out = await self.up.generator.call(STEP_RUBRIC, body)
        return make_rubric(
            [c.criterion for c in out.criteria], [float(c.weight) for c in out.criteria]
        )

    async def rubric(self, request: StepRubricRequest) -> StepRubricResponse:
        with request_context() as ctx:
            criteria = await self._generate(
                question=request.question,
                history=self.history(request.history),
                k=request.k,
                temperature=request.temperature,
                seed=request.seed,
            )
        out = _rubric_out(criteria)
        return StepRubricResponse(
            criteria=out.criteria, rendered=out.rendered, usage=usage_out(ctx.usage)
        )

    async def verify(self, request: VerifyRequest, tenant: str | None = None) -> VerifyResponse:
        """With a tenant, a request whose material addresses the judge is handed to the
        audit (kind `step`)."""
        criteria = _criteria_in(request.rubric, field="rubric.criteria")
        with request_context() as ctx:
            verdicts, markers = await step_verdicts(
                self.up.verifier,
                question=request.question,
                history=self.history(request.history),
                action=request.action,
                criteria=criteria,
            )
        score = weighted_fraction(criteria, [v.satisfied for v in verdicts])
        passed = passes(score, threshold=request.threshold)
        log.info("step.verify criteria=%d score=%.3f pass=%s", len(criteria), score, passed)
        hand_over(
            self.audit,
            tenant,
            AddressingReport(
                kind="step", items=1, flagged=_action_flagged(markers), markers=markers
            ),
        )
        return VerifyResponse(
            verdicts=_verdicts_out(criteria, verdicts),
            score=score,
            passed=passed,
            threshold=request.threshold,
            feedback=retry_feedback(criteria, verdicts),
            retry=not passed and request.attempt < STEP_MAX_RETRIES,
            usage=usage_out(ctx.usage),
            judge_addressing=markers,
        )

    # --- step rewards ---------------------------------------------------------------------

    async def score(self, request: ScoreRequest, tenant: str | None = None) -> ScoreResponse:
        """1. segment the trajectory (or take the pre-split steps); 2. take the given
        rubrics; 3. judge every step (a rubric where none was given, then its verdicts);
        4. decompose the outcome over the steps that were scored; 5. hand a trajectory in
        which some step's material addresses the judge to the audit (with a tenant: kind
        `step`, one report for the request); 6. respond."""
        started = time.perf_counter()
        seg, rendered = self._steps_of(request)
        given = _given_rubrics(request, len(seg.steps))
        with request_context() as ctx:
            judged = await self._judge_steps(request, seg, given)
        if all(j.error is not None for j in judged):
            raise judge_unavailable("step", judged[0].error, ctx)
        split = decompose_outcome(request.outcome, [j.score for j in judged if j.score is not None])
        steps = _scored_steps(seg, judged, split)
        failed = [i for i, step in enumerate(judged) if step.error is not None]
        log.info(
            "steps.scored steps=%d failed=%d decomposition=%s",
            len(steps),
            len(failed),
            split.method,
        )
        hand_over(self.audit, tenant, _steps_report(judged))
        return ScoreResponse(
            markup=seg.markup,
            rendered=rendered,
            prompt_messages=seg.prompt_messages,
            steps=steps,
            outcome=request.outcome,
            decomposition=split.method,
            failed_steps=failed,
            usage=usage_out(ctx.usage),
            timing=timing_since(started, ctx),
            judge_addressing=any(j.markers for j in judged),
        )

    def _steps_of(self, request: ScoreRequest) -> tuple[Segmentation, str | None]:
        """The steps to score and the text their spans index when the input was not a
        string (exactly one of `trajectory` and `steps`, at most `max_steps` steps)."""
        if (request.trajectory is None) == (request.steps is None):
            raise DomainError("give exactly one of `trajectory` and `steps`", field="trajectory")
        if request.steps is not None:
            seg = segment_steps([(s.action, s.observation) for s in request.steps])
            self._text_limit(seg.text, "steps")
            rendered: str | None = seg.text
        else:
            assert request.trajectory is not None
            seg = self._segment(request.trajectory)
            rendered = None if isinstance(request.trajectory, str) else seg.text
        n = len(seg.steps)
        if n > self.settings.max_steps:
            raise DomainError(f"{n} steps; at most {self.settings.max_steps}", field="trajectory")
        return seg, rendered

    async def _judge_steps(
        self,
        request: ScoreRequest,
        seg: Segmentation,
        given: Sequence[list[Criterion] | None],
    ) -> list["_JudgedStep"]:
        """Every step judged at once, `concurrency` model-server calls in flight: a step
        without a given rubric has one generated for its history, then its action is judged.
        A step whose calls fail after retries is flagged failed, not a 0."""
        gate = asyncio.Semaphore(self.settings.concurrency)

        async def one(i: int) -> _JudgedStep:
            step = _JudgedStep(criteria=given[i])
            history = seg.history(i)
            try:
                if step.criteria is None:
                    async with gate:
                        step.criteria = await self._generate(
                            question=request.question, history=history, k=request.k
                        )
                async with gate:
                    verdicts, step.markers = await step_verdicts(
                        self.up.verifier,
                        question=request.question,
                        history=history,
                        action=seg.action(i),
                        criteria=step.criteria,
                    )
            except UpstreamError as exc:
                FALLBACKS.labels("step_unscored").inc()
                log.warning("steps.step_failed step=%d error=%s", i, exc)
                step.error = str(exc)
                return step
            step.verdicts = verdicts
            step.score = weighted_fraction(step.criteria, [v.satisfied for v in verdicts])
            return step

        return list(await asyncio.gather(*(one(i) for i in range(len(seg.steps)))))


@dataclass
class _JudgedStep:
    """One step's judging: its rubric (given or generated), verdicts and score, or the error
    of the call that failed; what its material holds that addresses the judge."""

    criteria: list[Criterion] | None
    verdicts: list[Verdict] = field(default_factory=list)
    score: float | None = None
    error: str | None = None
    markers: list[str] = field(default_factory=list)


def _given_rubrics(request: ScoreRequest, n: int) -> list[list[Criterion] | None]:
    """The request's rubric per step (None: generate one); one entry per step when given."""
    if request.rubrics is None:
        return [None] * n
    if len(request.rubrics) != n:
        raise DomainError(f"one entry per step: the trajectory has {n} steps", field="rubrics")
    return [
        None if r is None else _criteria_in(r, field=f"rubrics[{i}].criteria")
        for i, r in enumerate(request.rubrics)
    ]


def _scored_steps(
    seg: Segmentation, judged: Sequence[_JudgedStep], split: StepRewards
) -> list[ScoredStep]:
    """Each step with its rubric, verdicts, score and its part of the decomposed outcome (the
    scored steps take `split`'s shares and rewards in order; a failed step has none)."""
    parts = iter(zip(split.shares, split.rewards, strict=True))
    steps: list[ScoredStep] = []
    for i, step in enumerate(judged):
        share, reward = next(parts) if step.error is None else (None, None)
        steps.append(
            ScoredStep(
                **_step_out(seg, i).model_dump(),
                status="ok" if step.error is None else "failed",
                rubric=None if step.criteria is None else _rubric_out(step.criteria),
                verdicts=[]
                if step.error or step.criteria is None
                else _verdicts_out(step.criteria, step.verdicts),
                score=step.score,
                share=share,
                reward=reward,
                error=step.error,
                judge_addressing=step.markers,
            )
        )
    return steps


def _steps_report(judged: Sequence[_JudgedStep]) -> AddressingReport:
    """The audit's report of a scored trajectory: each step whose action addresses the judge
    is flagged, every marker is prefixed with its step."""
    return AddressingReport(
        kind="step",
        items=len(judged),
        flagged=sum(_action_flagged(step.markers) for step in judged),
        markers=[f"step {i}: {m}" for i, step in enumerate(judged) for m in step.markers],
    )


# --- helpers ------------------------------------------------------------------------------


def _action_flagged(markers: Sequence[str]) -> int:
    """1 when the action itself addresses the judge (not only its history or criteria)."""
    return int(any(m.startswith("action:") for m in markers))


def _criteria_in(rubric: StepRubricIn, *, field: str) -> list[Criterion]:
    return make_rubric(
        [c.text for c in rubric.criteria], [c.weight for c in rubric.criteria], field=field
    )


def _rubric_out(criteria: Sequence[Criterion]) -> StepRubricOut:
    return StepRubricOut(
        criteria=[CriterionOut(text=c.text, weight=c.weight) for c in criteria],
        rendered=render_rubric(criteria),
    )


def _verdicts_out(criteria: Sequence[Criterion], verdicts: Sequence[Verdict]) -> list[VerdictOut]:
    return [
        VerdictOut(index=n, criterion=c.text, weight=c.weight, satisfied=v.satisfied)
        for n, (c, v) in enumerate(zip(criteria, verdicts, strict=True), start=1)
    ]


def _step_out(seg: Segmentation, i: int) -> StepOut:
    """Step `i` in its wire form (validated from the segmenter's step)."""
    return StepOut.model_validate(seg.steps[i], from_attributes=True)


def message_to_core(message: MessageIn) -> ChatMessage:
    """A wire chat message as the segmenter takes it."""
    if isinstance(message.content, list):
        content = "".join(p.text for p in message.content if p.type == "text")
    else:
        content = message.content or ""
    calls = tuple(
        ToolCall(
            name=c.function.name,
            arguments=c.function.arguments
            if isinstance(c.function.arguments, str)
            else json.dumps(c.function.arguments, ensure_ascii=False),
            id=c.id,
        )
        for c in message.tool_calls
    )
    return ChatMessage(
        role=message.role, content=content, tool_calls=calls, tool_call_id=message.tool_call_id
    )
