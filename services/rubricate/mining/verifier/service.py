"""Judging tasks of nugget mining: temporal consistency and duplicate queries."""

from rubricate.common.usage import Usage, usage_out
from rubricate.llm.base import LLMBackend
from rubricate.llm.server import TaskSettings
from rubricate.llm.settings import LLMSettings
from rubricate.llm.task_runner import run_structured_task
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


class MiningJudgeService:
    def __init__(self, *, backend: LLMBackend, tasks: TaskSettings, llm: LLMSettings) -> None:
        self.backend = backend
        self.tasks = tasks
        self.llm = llm

    @classmethod
    def factory(
        cls, backend: LLMBackend, tasks: TaskSettings, llm: LLMSettings
    ) -> "MiningJudgeService":
        return cls(backend=backend, tasks=tasks, llm=llm)

    async def temporal_check(self, request: TemporalCheckRequest) -> TemporalCheckResponse:
        usage = Usage()
        out = await run_structured_task(
            self.backend,
            mining.temporal_messages(
                query=request.query, passage=request.passage, max_chars=PASSAGE_CHARS
            ),
            output=mining.TemporalOutput,
            task=TEMPORAL_TASK,
            schema_name=TEMPORAL_TASK,
            llm=self.llm,
            max_tokens=48,
            temperature=self.tasks.scoring_temperature,
            usage=usage,
        )
        satisfied = True if out.constraint == "none" else out.satisfied
        return TemporalCheckResponse(
            constraint=out.constraint,
            satisfied=satisfied,
            usage=usage_out(usage),
            model=self.backend.model,
            backend=self.backend.name,
        )

    async def query_duplicate(self, request: QueryDuplicateRequest) -> QueryDuplicateResponse:
        n = len(request.existing)

        def validate(out: mining.DuplicateOutput) -> None:
            if out.similar_to is not None and not 1 <= out.similar_to <= n:
                raise ValueError(f"similar_to: {out.similar_to} is not a query number 1..{n}")

        usage = Usage()
        out = await run_structured_task(
            self.backend,
            mining.duplicate_messages(query=request.query, existing=request.existing),
            output=mining.DuplicateOutput,
            task=DUPLICATE_TASK,
            schema_name=DUPLICATE_TASK,
            llm=self.llm,
            max_tokens=40,
            temperature=self.tasks.scoring_temperature,
            usage=usage,
            validate=validate,
        )
        return QueryDuplicateResponse(
            duplicate=out.duplicate,
            similar_to=None if out.similar_to is None else out.similar_to - 1,
            usage=usage_out(usage),
            model=self.backend.model,
            backend=self.backend.name,
        )
