"""Judging tasks of nugget mining: temporal consistency and duplicate queries."""

from rubricate.common.usage import Usage
from rubricate.llm.task_service import TaskService
from rubricate.mining.prompts import pipeline as mining
from rubricate.mining.verifier import schemas

TEMPORAL_TASK = "temporal_check"
DUPLICATE_TASK = "query_duplicate"

PASSAGE_CHARS = 4000


class MiningJudgeService(TaskService):
    """The verifier's mining judgments: one structured call each, schema named after the task."""

    async def temporal_check(
        self, request: schemas.TemporalCheckRequest
    ) -> schemas.TemporalCheckResponse:
        usage = Usage()
        messages = mining.temporal_messages(
            query=request.query, passage=request.passage, max_chars=PASSAGE_CHARS
        )
        params = self.decoding("scoring", TEMPORAL_TASK, max_tokens=48)
        out = await self.structured(TEMPORAL_TASK, messages, mining.TemporalOutput, params, usage)
        satisfied = True if out.constraint == "none" else out.satisfied
        return schemas.TemporalCheckResponse(
            constraint=out.constraint, satisfied=satisfied, **self.served(usage)
        )

    async def query_duplicate(
        self, request: schemas.QueryDuplicateRequest
    ) -> schemas.QueryDuplicateResponse:
        n = len(request.existing)

        def validate(out: mining.DuplicateOutput) -> None:
            if out.similar_to is not None and not 1 <= out.similar_to <= n:
                raise ValueError(f"similar_to: {out.similar_to} is not a query number 1..{n}")

        usage = Usage()
        messages = mining.duplicate_messages(query=request.query, existing=request.existing)
        params = self.decoding("scoring", DUPLICATE_TASK, max_tokens=40)
        out = await self.structured(
            DUPLICATE_TASK, messages, mining.DuplicateOutput, params, usage, validate=validate
        )
        return schemas.QueryDuplicateResponse(
            duplicate=out.duplicate,
            similar_to=None if out.similar_to is None else out.similar_to - 1,
            **self.served(usage),
        )
