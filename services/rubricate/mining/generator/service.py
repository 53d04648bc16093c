"""Generation tasks of nugget mining: query rewrites, extraction, merging, importance."""

import logging

from rubricate.common.usage import Usage, usage_out
from rubricate.llm.base import LLMBackend
from rubricate.llm.server import TaskSettings
from rubricate.llm.settings import LLMSettings
from rubricate.llm.task_runner import run_structured_task
from rubricate.mining.generator.schemas import (
    MergedNugget,
    NuggetExtractionRequest,
    NuggetExtractionResponse,
    NuggetImportanceRequest,
    NuggetImportanceResponse,
    NuggetMergeRequest,
    NuggetMergeResponse,
    QueryRewritesRequest,
    QueryRewritesResponse,
    RewrittenQuery,
)
from rubricate.mining.prompts import pipeline as mining

log = logging.getLogger("rubricate.rubric_generator.mining")

REWRITE_TASK = "query_rewrites"
EXTRACT_TASK = "nugget_extraction"
MERGE_TASK = "nugget_merge"
IMPORTANCE_TASK = "nugget_importance"

PASSAGE_CHARS = 4000
"""Passages are 5–10 sentences; this clip only guards against pathological ones."""


class MiningGenerationService:
    def __init__(self, *, backend: LLMBackend, tasks: TaskSettings, llm: LLMSettings) -> None:
        self.backend = backend
        self.tasks = tasks
        self.llm = llm

    @classmethod
    def factory(
        cls, backend: LLMBackend, tasks: TaskSettings, llm: LLMSettings
    ) -> "MiningGenerationService":
        return cls(backend=backend, tasks=tasks, llm=llm)

    async def query_rewrites(self, request: QueryRewritesRequest) -> QueryRewritesResponse:
        usage = Usage()
        out = await run_structured_task(
            self.backend,
            mining.rewrite_messages(
                question=request.question,
                query=request.query,
                passage=request.passage,
                max_queries=request.max_queries,
                max_chars=PASSAGE_CHARS,
            ),
            output=mining.RewriteOutput,
            task=REWRITE_TASK,
            schema_name=REWRITE_TASK,
            llm=self.llm,
            max_tokens=120 + 90 * request.max_queries,
            temperature=self.tasks.generation_temperature,
            usage=usage,
        )
        queries = [
            RewrittenQuery(query=q.query.strip(), operations=list(dict.fromkeys(q.operations)))
            for q in out.queries[: request.max_queries]
        ]
        log.info("mining.rewrites proposed=%d", len(queries))
        return QueryRewritesResponse(
            queries=queries,
            usage=usage_out(usage),
            model=self.backend.model,
            backend=self.backend.name,
        )

    async def extract(self, request: NuggetExtractionRequest) -> NuggetExtractionResponse:
        usage = Usage()
        out = await run_structured_task(
            self.backend,
            mining.extract_messages(
                question=request.question,
                passage=request.passage,
                max_nuggets=request.max_nuggets,
                max_chars=PASSAGE_CHARS,
            ),
            output=mining.extract_output(request.max_nuggets),
            task=EXTRACT_TASK,
            schema_name=EXTRACT_TASK,
            llm=self.llm,
            max_tokens=80 + 80 * request.max_nuggets,
            temperature=self.tasks.generation_temperature,
            usage=usage,
        )
        return NuggetExtractionResponse(
            nuggets=out.nuggets[: request.max_nuggets],
            usage=usage_out(usage),
            model=self.backend.model,
            backend=self.backend.name,
        )

    async def merge(self, request: NuggetMergeRequest) -> NuggetMergeResponse:
        n = len(request.nuggets)

        def validate(out: mining.MergeOutput) -> None:
            for g, group in enumerate(out.groups):
                bad = [i for i in group.ids if not 1 <= i <= n]
                if bad:
                    raise ValueError(f"groups[{g}].ids: {bad} are not nugget numbers 1..{n}")

        usage = Usage()
        out = await run_structured_task(
            self.backend,
            mining.merge_messages(question=request.question, nuggets=request.nuggets),
            output=mining.MergeOutput,
            task=MERGE_TASK,
            schema_name=MERGE_TASK,
            llm=self.llm,
            max_tokens=100 + 50 * n,
            temperature=self.tasks.generation_temperature,
            usage=usage,
            validate=validate,
        )
        groups = [
            MergedNugget(text=g.nugget.strip(), ids=sorted({i - 1 for i in g.ids}))
            for g in out.groups
            if len(set(g.ids)) >= 2
        ]
        return NuggetMergeResponse(
            groups=groups,
            usage=usage_out(usage),
            model=self.backend.model,
            backend=self.backend.name,
        )

    async def importance(self, request: NuggetImportanceRequest) -> NuggetImportanceResponse:
        n = len(request.nuggets)

        def validate(out: mining.ImportanceOutput) -> None:
            if len(out.labels) != n:
                raise ValueError(f"labels: expected exactly {n} labels, got {len(out.labels)}")

        usage = Usage()
        out = await run_structured_task(
            self.backend,
            mining.importance_messages(question=request.question, nuggets=request.nuggets),
            output=mining.ImportanceOutput,
            task=IMPORTANCE_TASK,
            schema_name=IMPORTANCE_TASK,
            llm=self.llm,
            max_tokens=40 + 8 * n,
            temperature=self.tasks.scoring_temperature,
            usage=usage,
            validate=validate,
        )
        return NuggetImportanceResponse(
            labels=out.labels,
            usage=usage_out(usage),
            model=self.backend.model,
            backend=self.backend.name,
        )
