"""Judging tasks of nugget mining: temporal consistency and duplicate queries."""

from rubricate.common.usage import Usage
from rubricate.llm.base import GenerationParams
from rubricate.llm.calls import complete_structured
from rubricate.llm.task_service import TaskService
from rubricate.mining.prompts import pipeline as mining
from rubricate.mining.verifier.schemas import (
    QueryDuplicateRequest,
    QueryDuplicateResponse,
    TemporalCheckRequest,
    TemporalCheckResponse,
)

TEMPORAL_TASK = "temporal_check"
DUPLICATE_TASK = "query_duplicate"

PASSAGE_CHARS = 4000


class MiningJudgeService(TaskService):
    """The verifier's mining judgments: one structured call each, schema named after the task."""

    async def temporal_check(self, request: TemporalCheckRequest) -> TemporalCheckResponse:
        usage = Usage()
        out = await complete_structured(
            self.backend,
            mining.temporal_messages(
                query=request.query, passage=request.passage, max_chars=PASSAGE_CHARS
            ),
            output=mining.TemporalOutput,
            params=GenerationParams(
                temperature=self.tasks.scoring_temperature,
                max_tokens=48,
                schema_name=TEMPORAL_TASK,
            ),
            usage=usage,
            task=TEMPORAL_TASK,
            **self.retry,
        )
        satisfied = True if out.constraint == "none" else out.satisfied
        return TemporalCheckResponse(
            constraint=out.constraint, satisfied=satisfied, **self.served(usage)
        )

    async def query_duplicate(self, request: QueryDuplicateRequest) -> QueryDuplicateResponse:
        n = len(request.existing)

        def validate(out: mining.DuplicateOutput) -> None:
            if out.similar_to is not None and not 1 <= out.similar_to <= n:
                raise ValueError(f"similar_to: {out.similar_to} is not a query number 1..{n}")

        usage = Usage()
        out = await complete_structured(
            self.backend,
            mining.duplicate_messages(query=request.query, existing=request.existing),
            output=mining.DuplicateOutput,
            params=GenerationParams(
                temperature=self.tasks.scoring_temperature,
                max_tokens=40,
                schema_name=DUPLICATE_TASK,
            ),
            usage=usage,
            task=DUPLICATE_TASK,
            validate=validate,
            **self.retry,
        )
        return QueryDuplicateResponse(
            duplicate=out.duplicate,
            similar_to=None if out.similar_to is None else out.similar_to - 1,
            **self.served(usage),
        )
