"""Runs mining actions: retrieval against the corpus index, judge tasks over HTTP on the
rubric-generator (rewrites, extraction, merging, importance) and the verifier (temporal
check, duplicate queries) declared in their `endpoints` modules, through the platform's one
upstream client (`ServiceClient`: connection errors and 503/504 retried with jittered
backoff). Any other failure raises `UpstreamError`: a step never turns a failed judgment
into a verdict."""

import asyncio
import logging
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel

from rubricate.common.upstream import ServiceClient, UpstreamError
from rubricate.common.usage import Usage
from rubricate.mining.domain import search as mining
from rubricate.mining.generator.endpoints import (
    NUGGET_EXTRACTION,
    NUGGET_IMPORTANCE,
    NUGGET_MERGE,
    QUERY_REWRITES,
)
from rubricate.mining.miner.index import CorpusIndex
from rubricate.mining.verifier.endpoints import QUERY_DUPLICATE, TEMPORAL_CHECK
from rubricate_client.endpoints import Endpoint

log = logging.getLogger("rubricate.mining.miner.judge")

T = TypeVar("T", bound=BaseModel)


class ActionExecutor:
    """One per job run; `usage` accumulates the LLM work of every call (failed ones too)."""

    def __init__(
        self,
        *,
        index: CorpusIndex,
        tenant: str,
        corpus: str,
        generator_url: str,
        verifier_url: str,
        timeout_s: float,
        retries: int,
        concurrency: int,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.index = index
        self.tenant = tenant
        self.corpus = corpus
        self.usage = Usage()

        in_flight = asyncio.Semaphore(concurrency)  # one cap over both model servers

        def client(service: str, url: str) -> ServiceClient:
            return ServiceClient(
                service=service,
                base_url=url,
                timeout_s=timeout_s,
                retries=retries,
                concurrency=in_flight,
                transport=transport,
            )

        self._generator = client("rubric-generator", generator_url)
        self._verifier = client("verifier", verifier_url)

    async def aclose(self) -> None:
        await self._generator.aclose()
        await self._verifier.aclose()

    async def run(self, action: mining.MiningAction) -> object:
        if isinstance(action, mining.Retrieve):
            return await asyncio.to_thread(
                self.index.search,
                self.tenant,
                self.corpus,
                action.query,
                threshold=action.threshold,
                limit=action.limit,
            )
        if isinstance(action, mining.TemporalCheck):
            return list(
                await asyncio.gather(*(self._temporal(action.query, h) for h in action.passages))
            )
        if isinstance(action, mining.Rewrite):
            rewrites = await self._call(
                self._generator,
                QUERY_REWRITES,
                {
                    "question": action.question,
                    "query": action.query,
                    "passage": action.passage,
                    "max_queries": action.max_queries,
                },
            )
            return [
                mining.RewrittenQuery(text=q.query, operations=list(q.operations))
                for q in rewrites.queries
            ]
        if isinstance(action, mining.DuplicateCheck):
            verdict = await self._call(
                self._verifier,
                QUERY_DUPLICATE,
                {"query": action.query, "existing": action.existing},
            )
            return verdict.duplicate
        if isinstance(action, mining.Extract):
            return list(
                await asyncio.gather(*(self._extract(action, p.text) for p in action.passages))
            )
        if isinstance(action, mining.Merge):
            merged = await self._call(
                self._generator,
                NUGGET_MERGE,
                {"question": action.question, "nuggets": action.nuggets},
            )
            return [mining.MergeGroup(text=g.text, ids=g.ids) for g in merged.groups]
        if isinstance(action, mining.Label):
            labels = await self._call(
                self._generator,
                NUGGET_IMPORTANCE,
                {"question": action.question, "nuggets": action.nuggets},
            )
            return [str(label) for label in labels.labels]
        raise TypeError(f"unknown mining action {type(action).__name__}")

    async def _temporal(self, query: str, hit: mining.Hit) -> bool:
        verdict = await self._call(
            self._verifier,
            TEMPORAL_CHECK,
            {"query": query, "passage": hit.text},
        )
        return verdict.satisfied

    async def _extract(self, action: mining.Extract, passage: str) -> list[str] | None:
        """None when the judge's output stayed invalid after its repair (flagged by the core);
        any other failure raises."""
        try:
            out = await self._call(
                self._generator,
                NUGGET_EXTRACTION,
                {
                    "question": action.question,
                    "passage": passage,
                    "max_nuggets": action.max_nuggets,
                },
            )
        except UpstreamError as exc:
            if exc.type != "judge_output_invalid":
                raise
            log.warning("miner.extraction_invalid error=%s", exc)
            return None
        return list(out.nuggets)

    async def _call(self, client: ServiceClient, task: Endpoint[Any, T], body: dict[str, Any]) -> T:
        """One judge task, its body sent as built (the model server validates it); its LLM
        usage (failed attempts' too) is added to `self.usage`."""
        return await client.request(
            task.method,
            task.url_path({}),
            json=body,
            response_model=task.response,
            usage=self.usage,
        )
