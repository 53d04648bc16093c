"""Runs mining actions: retrieval against the corpus index, judge tasks over HTTP on the
rubric-generator (rewrites, extraction, merging, importance) and the verifier (temporal
check, duplicate queries). Calls are retried on connection errors and 503/504; any other
failure raises `JudgeCallError` — a step never turns a failed judgment into a verdict."""

import asyncio
import logging
import random
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel, ValidationError

from rubricate.common.auth import internal_headers
from rubricate.common.logging import REQUEST_ID, REQUEST_ID_HEADER
from rubricate.common.schemas import UsageOut
from rubricate.core import mining
from rubricate.llm.usage import Usage
from rubricate.miner.index import CorpusIndex
from rubricate.rubric_generator.mining_schemas import (
    NuggetExtractionResponse,
    NuggetImportanceResponse,
    NuggetMergeResponse,
    QueryRewritesResponse,
)
from rubricate.verifier.mining_schemas import QueryDuplicateResponse, TemporalCheckResponse

log = logging.getLogger("rubricate.miner.judge")

T = TypeVar("T", bound=BaseModel)
_RETRY_STATUS = frozenset({503, 504})


class JudgeCallError(Exception):
    def __init__(self, message: str, *, service: str, status: int | None, type: str) -> None:
        super().__init__(f"{service}: {message}")
        self.service = service
        self.status = status
        self.type = type


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
        self.retries = retries
        self.usage = Usage()
        self._sem = asyncio.Semaphore(concurrency)
        timeout = httpx.Timeout(timeout_s, connect=min(timeout_s, 10.0))
        headers = internal_headers()
        self._generator = httpx.AsyncClient(
            base_url=generator_url, timeout=timeout, transport=transport, headers=headers
        )
        self._verifier = httpx.AsyncClient(
            base_url=verifier_url, timeout=timeout, transport=transport, headers=headers
        )

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
                "rubric-generator",
                "/v1/tasks/query-rewrites",
                {
                    "question": action.question,
                    "query": action.query,
                    "passage": action.passage,
                    "max_queries": action.max_queries,
                },
                QueryRewritesResponse,
            )
            return [
                mining.RewrittenQuery(text=q.query, operations=list(q.operations))
                for q in rewrites.queries
            ]
        if isinstance(action, mining.DuplicateCheck):
            verdict = await self._call(
                self._verifier,
                "verifier",
                "/v1/tasks/query-duplicate",
                {"query": action.query, "existing": action.existing},
                QueryDuplicateResponse,
            )
            return verdict.duplicate
        if isinstance(action, mining.Extract):
            return list(
                await asyncio.gather(*(self._extract(action, p.text) for p in action.passages))
            )
        if isinstance(action, mining.Merge):
            merged = await self._call(
                self._generator,
                "rubric-generator",
                "/v1/tasks/nugget-merge",
                {"question": action.question, "nuggets": action.nuggets},
                NuggetMergeResponse,
            )
            return [mining.MergeGroup(text=g.text, ids=g.ids) for g in merged.groups]
        if isinstance(action, mining.Label):
            labels = await self._call(
                self._generator,
                "rubric-generator",
                "/v1/tasks/nugget-importance",
                {"question": action.question, "nuggets": action.nuggets},
                NuggetImportanceResponse,
            )
            return [str(label) for label in labels.labels]
        raise TypeError(f"unknown mining action {type(action).__name__}")

    async def _temporal(self, query: str, hit: mining.Hit) -> bool:
        verdict = await self._call(
            self._verifier,
            "verifier",
            "/v1/tasks/temporal-check",
            {"query": query, "passage": hit.text},
            TemporalCheckResponse,
        )
        return verdict.satisfied

    async def _extract(self, action: mining.Extract, passage: str) -> list[str] | None:
        """None when the judge's output stayed invalid after its repair (flagged by the core);
        any other failure raises."""
        try:
            out = await self._call(
                self._generator,
                "rubric-generator",
                "/v1/tasks/nugget-extraction",
                {
                    "question": action.question,
                    "passage": passage,
                    "max_nuggets": action.max_nuggets,
                },
                NuggetExtractionResponse,
            )
        except JudgeCallError as exc:
            if exc.type != "judge_output_invalid":
                raise
            log.warning("miner.extraction_invalid error=%s", exc)
            return None
        return list(out.nuggets)

    async def _call(
        self,
        client: httpx.AsyncClient,
        service: str,
        path: str,
        body: dict[str, Any],
        model: type[T],
    ) -> T:
        headers = {}
        rid = REQUEST_ID.get()
        if rid:
            headers[REQUEST_ID_HEADER] = rid
        attempt = 0
        while True:
            async with self._sem:
                try:
                    response = await client.post(path, json=body, headers=headers)
                except httpx.TransportError as exc:
                    error = JudgeCallError(
                        f"{type(exc).__name__}: {exc}",
                        service=service,
                        status=None,
                        type="upstream_unreachable",
                    )
                    response = None
            if response is not None:
                if response.status_code < 400:
                    try:
                        parsed = model.model_validate_json(response.content)
                    except ValidationError as exc:
                        raise JudgeCallError(
                            str(exc), service=service, status=200, type="upstream_invalid_response"
                        ) from exc
                    usage = getattr(parsed, "usage", None)
                    if isinstance(usage, UsageOut):
                        self.usage.merge(usage.to_usage())
                    return parsed
                error = self._error(service, response)
                if response.status_code not in _RETRY_STATUS:
                    raise error
            if attempt >= self.retries:
                raise error
            attempt += 1
            delay = min(8.0, 0.25 * 2**attempt) * (0.5 + random.random() / 2)
            log.warning(
                "miner.judge_retry service=%s path=%s attempt=%d error=%s",
                service,
                path,
                attempt,
                error,
            )
            await asyncio.sleep(delay)

    def _error(self, service: str, response: httpx.Response) -> JudgeCallError:
        try:
            body = response.json()["error"]
            if body.get("usage"):
                self.usage.merge(UsageOut.model_validate(body["usage"]).to_usage())
            return JudgeCallError(
                str(body.get("message", "")),
                service=service,
                status=response.status_code,
                type=str(body.get("type", "upstream_error")),
            )
        except (ValueError, KeyError, TypeError, ValidationError):
            return JudgeCallError(
                response.text[:500],
                service=service,
                status=response.status_code,
                type="upstream_error",
            )
