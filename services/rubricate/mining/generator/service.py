"""Generation tasks of nugget mining: query rewrites, extraction, merging, importance."""

import logging

from rubricate.common.usage import Usage
from rubricate.llm.base import GenerationParams
from rubricate.llm.calls import complete_structured
from rubricate.llm.task_service import TaskService
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


class MiningGenerationService(TaskService):
    """The generator's mining tasks: one structured call each, schema named after the task."""

    async def query_rewrites(self, request: QueryRewritesRequest) -> QueryRewritesResponse:
        usage = Usage()
        out = await complete_structured(
            self.backend,
            mining.rewrite_messages(
                question=request.question,
                query=request.query,
                passage=request.passage,
                max_queries=request.max_queries,
                max_chars=PASSAGE_CHARS,
            ),
            output=mining.RewriteOutput,
            params=GenerationParams(
                temperature=self.tasks.generation_temperature,
                max_tokens=120 + 90 * request.max_queries,
                schema_name=REWRITE_TASK,
            ),
            usage=usage,
            task=REWRITE_TASK,
            **self.retry,
        )
        queries = [
            RewrittenQuery(query=q.query.strip(), operations=list(dict.fromkeys(q.operations)))
            for q in out.queries[: request.max_queries]
        ]
        log.info("mining.rewrites proposed=%d", len(queries))
        return QueryRewritesResponse(
            queries=queries,
            **self.served(usage),
        )

    async def extract(self, request: NuggetExtractionRequest) -> NuggetExtractionResponse:
        usage = Usage()
        out = await complete_structured(
            self.backend,
            mining.extract_messages(
                question=request.question,
                passage=request.passage,
                max_nuggets=request.max_nuggets,
                max_chars=PASSAGE_CHARS,
            ),
            output=mining.extract_output(request.max_nuggets),
            params=GenerationParams(
                temperature=self.tasks.generation_temperature,
                max_tokens=80 + 80 * request.max_nuggets,
                schema_name=EXTRACT_TASK,
            ),
            usage=usage,
            task=EXTRACT_TASK,
            **self.retry,
        )
        return NuggetExtractionResponse(
            nuggets=out.nuggets[: request.max_nuggets],
            **self.served(usage),
        )

    async def merge(self, request: NuggetMergeRequest) -> NuggetMergeResponse:
        n = len(request.nuggets)

        def validate(out: mining.MergeOutput) -> None:
            for g, group in enumerate(out.groups):
                bad = [i for i in group.ids if not 1 <= i <= n]
                if bad:
                    raise ValueError(f"groups[{g}].ids: {bad} are not nugget numbers 1..{n}")

        usage = Usage()
        out = await complete_structured(
            self.backend,
            mining.merge_messages(question=request.question, nuggets=request.nuggets),
            output=mining.MergeOutput,
            params=GenerationParams(
                temperature=self.tasks.generation_temperature,
                max_tokens=100 + 50 * n,
                schema_name=MERGE_TASK,
            ),
            usage=usage,
            task=MERGE_TASK,
            validate=validate,
            **self.retry,
        )
        groups = [
            MergedNugget(text=g.nugget.strip(), ids=sorted({i - 1 for i in g.ids}))
            for g in out.groups
            if len(set(g.ids)) >= 2
        ]
        return NuggetMergeResponse(
            groups=groups,
            **self.served(usage),
        )

    async def importance(self, request: NuggetImportanceRequest) -> NuggetImportanceResponse:
        n = len(request.nuggets)

        def validate(out: mining.ImportanceOutput) -> None:
            if len(out.labels) != n:
                raise ValueError(f"labels: expected exactly {n} labels, got {len(out.labels)}")

        usage = Usage()
        out = await complete_structured(
            self.backend,
            mining.importance_messages(question=request.question, nuggets=request.nuggets),
            output=mining.ImportanceOutput,
            params=GenerationParams(
                temperature=self.tasks.scoring_temperature,
                max_tokens=40 + 8 * n,
                schema_name=IMPORTANCE_TASK,
            ),
            usage=usage,
            task=IMPORTANCE_TASK,
            validate=validate,
            **self.retry,
        )
        return NuggetImportanceResponse(
            labels=out.labels,
            **self.served(usage),
        )
