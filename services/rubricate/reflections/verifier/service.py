"""Reflection judging (RubricEM App. D.6.2): one structured LLM call per candidate."""

import logging
import time
from typing import Any

from rubricate.common.usage import Usage, usage_out
from rubricate.llm.base import GenerationParams, LLMBackend
from rubricate.llm.judge_call import judge_call
from rubricate.llm.server import TaskSettings
from rubricate.llm.settings import LLMSettings
from rubricate.llm.structured import json_schema_for
from rubricate.reflections.prompts import judging as reflection_judging
from rubricate.reflections.verifier.schemas import ReflectionScoresRequest, ReflectionScoresResponse

log = logging.getLogger("rubricate.verifier")

TASK = "reflection_judging"
TRAJECTORY_BUDGET_STAGES = 2
"""The whole trajectory is clipped to this many per-stage budgets (head and tail kept, so
the final answer stays in view)."""


class ReflectionJudgeService:
    def __init__(self, *, backend: LLMBackend, tasks: TaskSettings, llm: LLMSettings) -> None:
        self.backend = backend
        self.tasks = tasks
        self.llm = llm
        self._schema: dict[str, Any] = reflection_judging.verdict_schema(
            json_schema_for(reflection_judging.ReflectionVerdict)
        )

    async def score(self, request: ReflectionScoresRequest) -> ReflectionScoresResponse:
        messages = reflection_judging.build_messages(
            question=request.question,
            trajectory=request.trajectory,
            stage_scores=request.stage_scores,
            evidence=request.evidence,
            candidate=request.candidate,
            max_trajectory_chars=self.tasks.max_chars_per_stage * TRAJECTORY_BUDGET_STAGES,
        )
        params = GenerationParams(
            temperature=self.tasks.scoring_temperature,
            max_tokens=self.tasks.scoring_max_tokens,
            json_schema=self._schema,
            schema_name=reflection_judging.SCHEMA_NAME,
        )
        usage = Usage()
        started = time.perf_counter()
        verdict = await judge_call(
            self.backend,
            messages,
            output=reflection_judging.ReflectionVerdict,
            params=params,
            task=TASK,
            llm=self.llm,
            usage=usage,
            stage="reflection",
        )
        elapsed = time.perf_counter() - started
        log.info("reflection.judged evidence=%d seconds=%.1f", len(request.evidence), elapsed)
        return ReflectionScoresResponse(
            within=verdict.within.as_unit(),
            cross=verdict.cross.as_unit(),
            rationale=verdict.rationale,
            usage=usage_out(usage),
            model=self.backend.model,
            backend=self.backend.name,
        )
