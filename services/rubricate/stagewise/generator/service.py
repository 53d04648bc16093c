"""Stage-rubric generation: one structured LLM call per rollout group."""

import logging
import time

from rubricate.common.usage import Usage, usage_out
from rubricate.llm.base import GenerationParams, LLMBackend
from rubricate.llm.judge_call import judge_call
from rubricate.llm.server import TaskSettings
from rubricate.llm.settings import LLMSettings
from rubricate.llm.structured import json_schema_for
from rubricate.stagewise.generator.schemas import StageRubricsRequest, StageRubricsResponse
from rubricate.stagewise.prompts import rubric_generation as stage_rubrics

log = logging.getLogger("rubricate.rubric_generator")

TASK = "stage_rubric_generation"


class RubricGeneratorService:
    def __init__(self, *, backend: LLMBackend, tasks: TaskSettings, llm: LLMSettings) -> None:
        self.backend = backend
        self.tasks = tasks
        self.llm = llm
        self._schema = json_schema_for(stage_rubrics.GeneratedRubrics)

    async def stage_rubrics(self, request: StageRubricsRequest) -> StageRubricsResponse:
        messages = stage_rubrics.build_messages(
            question=request.question,
            trajectories=[
                stage_rubrics.GroupTrajectory(id=t.id, stages=t.stages)
                for t in request.trajectories
            ],
            existing=request.existing,
            max_chars_per_stage=self.tasks.max_chars_per_stage,
        )
        params = GenerationParams(
            temperature=self.tasks.generation_temperature,
            max_tokens=self.tasks.generation_max_tokens,
            json_schema=self._schema,
            schema_name="stage_rubrics",
        )
        usage = Usage()
        started = time.perf_counter()
        output = await judge_call(
            self.backend,
            messages,
            output=stage_rubrics.GeneratedRubrics,
            params=params,
            task=TASK,
            llm=self.llm,
            usage=usage,
        )
        elapsed = time.perf_counter() - started
        specs = output.specs()
        log.info(
            "rubrics.generated trajectories=%d new=%d seconds=%.1f",
            len(request.trajectories),
            sum(len(v) for v in specs.values()),
            elapsed,
        )
        return StageRubricsResponse(
            rubrics=specs,
            usage=usage_out(usage),
            model=self.backend.model,
            backend=self.backend.name,
        )
