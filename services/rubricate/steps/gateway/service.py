"""Orchestration of the step-level endpoints (Co-ReAct §3.3, App. A; ARCO).

- segment: core only.
- rubric: one step-rubric call (rubric-generator); weights normalized and rendered (core).
- verify: one step-verdicts call (verifier); weighted fraction, pass and feedback (core).
- score: per step, a rubric (given or generated for h_t) and a verdicts call on the step's
  action; the outcome decomposed over the steps (core). A step whose calls fail after retries
  is flagged and left out of the decomposition; if every step fails the request fails.
The listwise reward and multi-judge ranking live in `gateway/ranking.py` (`self.ranking`).

Material that addresses the judge (GitHub issue 25) is found and withheld by the verifier;
its markers are copied into the public responses (`judge_addressing`) and, with a tenant
and the audit on, handed to the audit (`AddressingReporter`).
"""

import asyncio
import json
import logging
import time
from collections.abc import Callable, Sequence
from typing import Protocol

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from rubricate.common.errors import ServiceError
from rubricate.common.metrics import FALLBACKS
from rubricate.common.request_context import WaitClock
from rubricate.common.upstream import ServiceClient, UpstreamError, Upstreams
from rubricate.common.usage import Usage, usage_out
from rubricate.steps.domain.rewards import (
    Criterion,
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
from rubricate.steps.gateway.ranking import RankingService, timing_since
from rubricate.steps.generator.schemas import StepRubricTaskRequest, StepRubricTaskResponse
from rubricate.steps.verifier.schemas import StepVerdictsRequest, StepVerdictsResponse
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

AddressingReporter = Callable[[str, AddressingReport], None]
"""Where a request in which something addressed the judge is handed to the audit (tenant,
report): the gateway's `AuditSubmitter.addressing`, which returns at once and never raises."""


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
            calls=self,
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
        temperature: float | None,
        seed: int | None,
        clock: WaitClock,
        usage: Usage,
    ) -> list[Criterion]:
        body = StepRubricTaskRequest(
            question=question, history=history, k=k, temperature=temperature, seed=seed
        )
        out = await self.up.generator.task(
            "/v1/tasks/step-rubric",
            body,
            response_model=StepRubricTaskResponse,
            clock=clock,
            usage=usage,
        )
        return make_rubric(
            [c.criterion for c in out.criteria], [float(c.weight) for c in out.criteria]
        )

    async def verdicts(
        self,
        *,
        question: str,
        history: str,
        action: str,
        criteria: Sequence[Criterion],
        clock: WaitClock,
        usage: Usage,
    ) -> list[Verdict]:
        verdicts, _ = await self.verdicts_flagged(
            question=question,
            history=history,
            action=action,
            criteria=criteria,
            clock=clock,
            usage=usage,
        )
        return verdicts

    async def verdicts_flagged(
        self,
        *,
        question: str,
        history: str,
        action: str,
        criteria: Sequence[Criterion],
        clock: WaitClock,
        usage: Usage,
    ) -> tuple[list[Verdict], list[str]]:
        """The verdicts, and what in the material addresses the judge (the verifier's
        `judge_addressing`: `action: ...`, `history: ...`, `criterion i: ...`)."""
        body = StepVerdictsRequest(
            question=question,
            history=history,
            action=action,
            criteria=[c.text for c in criteria],
        )
        out = await self.up.verifier.task(
            "/v1/tasks/step-verdicts",
            body,
            response_model=StepVerdictsResponse,
            clock=clock,
            usage=usage,
        )
        if len(out.verdicts) != len(criteria):
            raise UpstreamError(
                service=self.up.verifier.service,
                status=None,
                type="upstream_invalid_response",
                message=f"{len(out.verdicts)} verdicts for {len(criteria)} criteria",
            )
        return [Verdict(satisfied=v.satisfied) for v in out.verdicts], list(out.judge_addressing)

    async def rubric(self, request: StepRubricRequest) -> StepRubricResponse:
        usage = Usage()
        criteria = await self._generate(
            question=request.question,
            history=self.history(request.history),
            k=request.k,
            temperature=request.temperature,
            seed=request.seed,
            clock=WaitClock(),
            usage=usage,
        )
        out = _rubric_out(criteria)
        return StepRubricResponse(
            criteria=out.criteria, rendered=out.rendered, usage=usage_out(usage)
        )

    async def verify(self, request: VerifyRequest, tenant: str | None = None) -> VerifyResponse:
        """With a tenant, a request whose material addresses the judge is handed to the
        audit (kind `step`)."""
        criteria = _criteria_in(request.rubric, field="rubric.criteria")
        usage = Usage()
        verdicts, markers = await self.verdicts_flagged(
            question=request.question,
            history=self.history(request.history),
            action=request.action,
            criteria=criteria,
            clock=WaitClock(),
            usage=usage,
        )
        score = weighted_fraction(criteria, [v.satisfied for v in verdicts])
        passed = passes(score, threshold=request.threshold)
        log.info("step.verify criteria=%d score=%.3f pass=%s", len(criteria), score, passed)
        _hand_over(
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
            usage=usage_out(usage),
            judge_addressing=markers,
        )

    # --- step rewards ---------------------------------------------------------------------

    async def score(self, request: ScoreRequest, tenant: str | None = None) -> ScoreResponse:
        """With a tenant, a trajectory in which some step's material addresses the judge is
        handed to the audit (kind `step`, one report for the request)."""
        started = time.perf_counter()
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
        given: list[list[Criterion] | None] = [None] * n
        if request.rubrics is not None:
            if len(request.rubrics) != n:
                raise DomainError(
                    f"one entry per step: the trajectory has {n} steps", field="rubrics"
                )
            given = [
                None if r is None else _criteria_in(r, field=f"rubrics[{i}].criteria")
                for i, r in enumerate(request.rubrics)
            ]
        clock = WaitClock()
        usage = Usage()
        gate = asyncio.Semaphore(self.settings.concurrency)
        flags: list[list[str]] = [[] for _ in range(n)]

        async def one(i: int) -> tuple[list[Criterion] | None, list[Verdict], str | None]:
            criteria = given[i]
            history = seg.history(i)
            try:
                if criteria is None:
                    async with gate:
                        criteria = await self._generate(
                            question=request.question,
                            history=history,
                            k=request.k,
                            temperature=None,
                            seed=None,
                            clock=clock,
                            usage=usage,
                        )
                async with gate:
                    verdicts, flags[i] = await self.verdicts_flagged(
                        question=request.question,
                        history=history,
                        action=seg.action(i),
                        criteria=criteria,
                        clock=clock,
                        usage=usage,
                    )
            except UpstreamError as exc:
                FALLBACKS.labels("step_unscored").inc()
                log.warning("steps.step_failed step=%d error=%s", i, exc)
                return criteria, [], str(exc)
            return criteria, verdicts, None

        results = await asyncio.gather(*(one(i) for i in range(n)))
        ok = [i for i, (_, _, error) in enumerate(results) if error is None]
        if not ok:
            raise ServiceError(
                502,
                f"no step could be scored: {results[0][2]}",
                type="judge_unavailable",
                usage=usage_out(usage),
            )
        scores: dict[int, float] = {}
        for i in ok:
            criteria, verdicts, _ = results[i]
            assert criteria is not None
            scores[i] = weighted_fraction(criteria, [v.satisfied for v in verdicts])
        split = decompose_outcome(request.outcome, [scores[i] for i in ok])
        reward_of = dict(zip(ok, split.rewards, strict=True))
        share_of = dict(zip(ok, split.shares, strict=True))
        steps: list[ScoredStep] = []
        for i, (criteria, verdicts, error) in enumerate(results):
            base = _step_out(seg, i)
            steps.append(
                ScoredStep(
                    **base.model_dump(),
                    status="ok" if error is None else "failed",
                    rubric=None if criteria is None else _rubric_out(criteria),
                    verdicts=[] if error or criteria is None else _verdicts_out(criteria, verdicts),
                    score=scores.get(i),
                    share=share_of.get(i),
                    reward=reward_of.get(i),
                    error=error,
                    judge_addressing=flags[i],
                )
            )
        failed = [i for i in range(n) if i not in reward_of]
        log.info("steps.scored steps=%d failed=%d decomposition=%s", n, len(failed), split.method)
        _hand_over(
            self.audit,
            tenant,
            AddressingReport(
                kind="step",
                items=n,
                flagged=sum(_action_flagged(found) for found in flags),
                markers=[f"step {i}: {m}" for i, found in enumerate(flags) for m in found],
            ),
        )
        return ScoreResponse(
            markup=seg.markup,
            rendered=rendered,
            prompt_messages=seg.prompt_messages,
            steps=steps,
            outcome=request.outcome,
            decomposition=split.method,
            failed_steps=failed,
            usage=usage_out(usage),
            timing=timing_since(started, clock),
            judge_addressing=any(flags),
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
    step = seg.steps[i]
    return StepOut(
        index=step.index,
        kind=step.kind,
        span=step.span,
        action_span=step.action_span,
        observation_span=step.observation_span,
        message_span=step.message_span,
    )


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


def _hand_over(
    audit: AddressingReporter | None, tenant: str | None, report: AddressingReport
) -> None:
    """Hand a request in which something addressed the judge to the audit, when there is an
    audit and a tenant (the reporter returns at once and never raises)."""
    if audit is not None and tenant is not None and (report.markers or report.flagged):
        audit(tenant, report)
