"""Reflection judging (RubricEM App. D.6.2): one structured LLM call per candidate.

A candidate whose text addresses the judge (`llm.prompt_text.manipulation_markers`) is
scored 0 on every dimension without a model call, and a trajectory that does is withheld
from the prompt; the response lists what was found (`judge_addressing`, GitHub issue 25)."""

import logging
import time

from rubricate.common.usage import Usage
from rubricate.llm.prompt_text import manipulation_markers
from rubricate.llm.structured import json_schema_for
from rubricate.llm.task_service import TaskService
from rubricate.reflections.domain.reflection import DIMENSION_WEIGHTS
from rubricate.reflections.prompts import judging as reflection_judging
from rubricate.reflections.verifier.schemas import ReflectionScoresRequest, ReflectionScoresResponse

log = logging.getLogger("rubricate.verifier")

TASK = "reflection_judging"
TRAJECTORY_BUDGET_STAGES = 2
"""The whole trajectory is clipped to this many per-stage budgets (head and tail kept, so
the final answer stays in view)."""


_SCHEMA = reflection_judging.verdict_schema(json_schema_for(reflection_judging.ReflectionVerdict))


class ReflectionJudgeService(TaskService):
    """The verifier's reflection judging task."""

    async def score(self, request: ReflectionScoresRequest) -> ReflectionScoresResponse:
        candidate_markers = manipulation_markers(request.candidate)
        trajectory_markers = manipulation_markers(request.trajectory)
        found = [f"candidate: {m}" for m in candidate_markers]
        found += [f"trajectory: {m}" for m in trajectory_markers]
        usage = Usage()
        empty = not candidate_markers and not await self._has_content(request, usage)
        if candidate_markers or empty:
            log.warning("reflection.withheld markers=%s", "; ".join(found) or "(no content)")
            zero = dict.fromkeys(DIMENSION_WEIGHTS, 0.0)
            return ReflectionScoresResponse(
                within=dict(zero),
                cross=dict(zero),
                rationale=(
                    "Withheld: the reflection contains text aimed at the grader ("
                    + ", ".join(candidate_markers)
                    + "); it scores 0 on every dimension."
                    if candidate_markers
                    else "The reflection holds no content (every unit talks about the text or "
                    "says nothing); it scores 0 on every dimension."
                ),
                judge_addressing=found,
                **self.served(usage),
            )
        messages = reflection_judging.build_messages(
            question=request.question,
            trajectory=request.trajectory,
            stage_scores=request.stage_scores,
            evidence=request.evidence,
            candidate=request.candidate,
            max_trajectory_chars=self.tasks.max_chars_per_stage * TRAJECTORY_BUDGET_STAGES,
            trajectory_markers=trajectory_markers,
        )
        params = self.decoding("scoring", reflection_judging.SCHEMA_NAME, json_schema=_SCHEMA)
        started = time.perf_counter()
        verdict = await self.structured(
            TASK, messages, reflection_judging.ReflectionVerdict, params, usage, stage="reflection"
        )
        elapsed = time.perf_counter() - started
        log.info("reflection.judged evidence=%d seconds=%.1f", len(request.evidence), elapsed)
        return ReflectionScoresResponse(
            within=verdict.within.as_unit(),
            cross=verdict.cross.as_unit(),
            rationale=verdict.rationale,
            judge_addressing=found,
            **self.served(usage),
        )

    async def _has_content(self, request: ReflectionScoresRequest, usage: Usage) -> bool:
        """Whether any of the reflection, read as units (`process`), is content: a
        content-free "master key" scores 0 with no judge call. A reflection with content is
        shown as written: its tagged sections (`<reflection_rubrics>`, category headings) are
        the format the judge checks, and a unit view would set them aside as talk about
        rubrics (docs/reflections.md, what is not defended)."""
        if not self.units.on:
            return True
        reading = await self.units.read(
            request.candidate, question=request.question, usage=usage, reading="process"
        )
        return reading.has_assertion
