"""Step-rubric generation: one structured LLM call per step (Co-ReAct §3.3, ARCO)."""

import logging
import time
from functools import cache
from typing import Any, Unpack

from rubricate.common.usage import Usage
from rubricate.llm.base import GenerationParams
from rubricate.llm.structured import json_schema_for
from rubricate.llm.task_service import TaskService, TaskServiceArgs
from rubricate.steps.generator.schemas import (
    DraftCriterionOut,
    StepRubricTaskRequest,
    StepRubricTaskResponse,
)
from rubricate.steps.prompts import rubric as step_rubric
from rubricate.steps.settings import StepTaskSettings

log = logging.getLogger("rubricate.rubric_generator.steps")

TASK = "step_rubric_generation"  # the judge metrics' task label (common.metrics.JUDGE_TASKS)

_DRAFT = json_schema_for(step_rubric.StepRubricDraft)


@cache
def _draft_schema(k: int) -> dict[str, Any]:
    """The draft's schema for exactly `k` criteria (built once per count)."""
    return step_rubric.draft_schema(_DRAFT, k=k)


class StepRubricService(TaskService):
    """The generator's step rubric task (its settings: `steps.settings.StepTaskSettings`)."""

    def __init__(
        self, *, steps: StepTaskSettings | None = None, **common: Unpack[TaskServiceArgs]
    ) -> None:
        super().__init__(**common)
        self.steps = steps or StepTaskSettings()

    async def generate(self, request: StepRubricTaskRequest) -> StepRubricTaskResponse:
        messages = step_rubric.build_messages(
            question=request.question,
            history=request.history,
            k=request.k,
            max_history_chars=self.steps.max_history_chars,
        )
        temperature = (
            self.steps.rubric_temperature if request.temperature is None else request.temperature
        )
        params = GenerationParams(
            temperature=temperature,
            max_tokens=self.steps.rubric_max_tokens,
            seed=request.seed if request.seed is not None else 0,
            json_schema=_draft_schema(request.k),
            schema_name=step_rubric.SCHEMA_NAME,
        )
        usage = Usage()
        started = time.perf_counter()
        draft = await self.structured(
            TASK,
            messages,
            step_rubric.StepRubricDraft,
            params,
            usage,
            validate=lambda d: step_rubric.check_draft(d, k=request.k),
        )
        log.info(
            "step_rubric.generated k=%d seconds=%.1f", request.k, time.perf_counter() - started
        )
        return StepRubricTaskResponse(
            criteria=[
                DraftCriterionOut(criterion=c.criterion, weight=c.weight) for c in draft.criteria
            ],
            **self.served(usage),
        )
