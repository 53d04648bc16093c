"""Step-rubric generation: one structured LLM call per step (Co-ReAct §3.3, ARCO)."""

import logging
import time
from typing import Any

from rubricate.common.usage import Usage, usage_out
from rubricate.llm.base import GenerationParams, LLMBackend
from rubricate.llm.judge_call import judge_call
from rubricate.llm.server import TaskSettings
from rubricate.llm.settings import LLMSettings
from rubricate.llm.structured import json_schema_for
from rubricate.steps.generator.schemas import (
    DraftCriterionOut,
    StepRubricTaskRequest,
    StepRubricTaskResponse,
)
from rubricate.steps.prompts import rubric as step_rubric
from rubricate.steps.settings import StepTaskSettings

log = logging.getLogger("rubricate.rubric_generator.steps")

TASK = "step_rubric_generation"  # the judge metrics' task label (common.metrics.JUDGE_TASKS)


class StepRubricService:
    def __init__(self, *, backend: LLMBackend, llm: LLMSettings, steps: StepTaskSettings) -> None:
        self.backend = backend
        self.llm = llm
        self.steps = steps
        self._base = json_schema_for(step_rubric.StepRubricDraft)
        self._schemas: dict[int, dict[str, Any]] = {}

    @classmethod
    def factory(
        cls, backend: LLMBackend, _tasks: TaskSettings, llm: LLMSettings
    ) -> "StepRubricService":
        return cls(backend=backend, llm=llm, steps=StepTaskSettings())

    def _schema(self, k: int) -> dict[str, Any]:
        if k not in self._schemas:
            self._schemas[k] = step_rubric.draft_schema(self._base, k=k)
        return self._schemas[k]

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
            json_schema=self._schema(request.k),
            schema_name=step_rubric.SCHEMA_NAME,
        )
        usage = Usage()
        started = time.perf_counter()
        draft = await judge_call(
            self.backend,
            messages,
            output=step_rubric.StepRubricDraft,
            params=params,
            task=TASK,
            llm=self.llm,
            usage=usage,
            validate=lambda d: step_rubric.check_draft(d, k=request.k),
        )
        log.info(
            "step_rubric.generated k=%d seconds=%.1f", request.k, time.perf_counter() - started
        )
        return StepRubricTaskResponse(
            criteria=[
                DraftCriterionOut(criterion=c.criterion, weight=c.weight) for c in draft.criteria
            ],
            usage=usage_out(usage),
            model=self.backend.model,
            backend=self.backend.name,
        )
