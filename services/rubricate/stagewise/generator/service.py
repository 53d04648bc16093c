"""Stage-rubric generation: one structured LLM call per rollout group."""

import logging
import time

from rubricate.common.usage import Usage
from rubricate.llm.structured import json_schema_for
from rubricate.llm.task_service import TaskService
from rubricate.stagewise.generator.schemas import StageRubricsRequest, StageRubricsResponse
from rubricate.stagewise.prompts import rubric_generation as stage_rubrics

log = logging.getLogger("rubricate.rubric_generator")

TASK = "stage_rubric_generation"  # the judge metrics' task label, and `STAGE_RUBRICS.name`

_SCHEMA = json_schema_for(stage_rubrics.GeneratedRubrics)


class StageRubricService(TaskService):
    """The generator's stage rubrics task (`stagewise.generator.endpoints.STAGE_RUBRICS`)."""

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
        params = self.decoding("generation", "stage_rubrics", json_schema=_SCHEMA)
        usage = Usage()
        started = time.perf_counter()
        output = await self.structured(
            TASK, messages, stage_rubrics.GeneratedRubrics, params, usage
        )
        specs = output.specs()
        log.info(
            "rubrics.generated trajectories=%d new=%d seconds=%.1f",
            len(request.trajectories),
            sum(len(v) for v in specs.values()),
            time.perf_counter() - started,
        )
        return StageRubricsResponse(rubrics=specs, **self.served(usage))
