"""Generation tasks of nugget mining: query rewrites, extraction, merging, importance."""

import logging

from rubricate.common.usage import Usage
from rubricate.llm.task_service import TaskService
from rubricate.mining.generator import schemas
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

    async def query_rewrites(
        self, request: schemas.QueryRewritesRequest
    ) -> schemas.QueryRewritesResponse:
        usage = Usage()
        messages = mining.rewrite_messages(
            question=request.question,
            query=request.query,
            passage=request.passage,
            max_queries=request.max_queries,
            max_chars=PASSAGE_CHARS,
        )
        params = self.decoding(
            "generation", REWRITE_TASK, max_tokens=120 + 90 * request.max_queries
        )
        out = await self.structured(REWRITE_TASK, messages, mining.RewriteOutput, params, usage)
        queries = [
            schemas.RewrittenQuery(
                query=q.query.strip(), operations=list(dict.fromkeys(q.operations))
            )
            for q in out.queries[: request.max_queries]
        ]
        log.info("mining.rewrites proposed=%d", len(queries))
        return schemas.QueryRewritesResponse(queries=queries, **self.served(usage))

    async def extract(
        self, request: schemas.NuggetExtractionRequest
    ) -> schemas.NuggetExtractionResponse:
        usage = Usage()
        max_nuggets = request.max_nuggets
        messages = mining.extract_messages(
            question=request.question,
            passage=request.passage,
            max_nuggets=max_nuggets,
            max_chars=PASSAGE_CHARS,
        )
        params = self.decoding("generation", EXTRACT_TASK, max_tokens=80 + 80 * max_nuggets)
        output = mining.extract_output(max_nuggets)
        out = await self.structured(EXTRACT_TASK, messages, output, params, usage)
        return schemas.NuggetExtractionResponse(
            nuggets=out.nuggets[:max_nuggets], **self.served(usage)
        )

    async def merge(self, request: schemas.NuggetMergeRequest) -> schemas.NuggetMergeResponse:
        n = len(request.nuggets)

        def validate(out: mining.MergeOutput) -> None:
            for g, group in enumerate(out.groups):
                bad = [i for i in group.ids if not 1 <= i <= n]
                if bad:
                    raise ValueError(f"groups[{g}].ids: {bad} are not nugget numbers 1..{n}")

        usage = Usage()
        messages = mining.merge_messages(question=request.question, nuggets=request.nuggets)
        params = self.decoding("generation", MERGE_TASK, max_tokens=100 + 50 * n)
        out = await self.structured(
            MERGE_TASK, messages, mining.MergeOutput, params, usage, validate=validate
        )
        groups = [
            schemas.MergedNugget(text=g.nugget.strip(), ids=sorted({i - 1 for i in g.ids}))
            for g in out.groups
            if len(set(g.ids)) >= 2
        ]
        return schemas.NuggetMergeResponse(groups=groups, **self.served(usage))

    async def importance(
        self, request: schemas.NuggetImportanceRequest
    ) -> schemas.NuggetImportanceResponse:
        n = len(request.nuggets)

        def validate(out: mining.ImportanceOutput) -> None:
            if len(out.labels) != n:
                raise ValueError(f"labels: expected exactly {n} labels, got {len(out.labels)}")

        usage = Usage()
        messages = mining.importance_messages(question=request.question, nuggets=request.nuggets)
        params = self.decoding("scoring", IMPORTANCE_TASK, max_tokens=40 + 8 * n)
        out = await self.structured(
            IMPORTANCE_TASK, messages, mining.ImportanceOutput, params, usage, validate=validate
        )
        return schemas.NuggetImportanceResponse(labels=out.labels, **self.served(usage))
