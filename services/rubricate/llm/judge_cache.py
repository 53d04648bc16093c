"""Cache of deterministic judge calls (temperature 0), with concurrent identical calls coalesced.

The key is a SHA-256 over backend, model, messages and every generation parameter, so a
change of prompt, schema or model is a miss. Redis is shared by replicas
(`RUBRICATE_LLM_CACHE=redis`); `memory` is a bounded LRU in the process. A cache that fails
(Redis down) is bypassed and counted, never an error of the call. A hit reports zero tokens:
no model work was spent.
"""

import asyncio
import hashlib
import json
import logging
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import asdict, replace
from typing import Any

from rubricate.common.metrics import JUDGE_CACHE
from rubricate.common.redis_client import CancellableRedis, redis_client
from rubricate.llm.base import (
    ChoiceScores,
    Completion,
    GenerationParams,
    LLMBackend,
    Message,
    TokenLogprob,
    WrappingBackend,
)

log = logging.getLogger("rubricate.llm.cache")


class CompletionCache(ABC):
    @abstractmethod
    async def get(self, key: str) -> str | None: ...

    @abstractmethod
    async def put(self, key: str, value: str) -> None: ...

    async def aclose(self) -> None:  # noqa: B027 - optional hook
        pass


class MemoryCompletionCache(CompletionCache):
    def __init__(self, *, max_entries: int = 4096) -> None:
        self.max_entries = max_entries
        self._data: OrderedDict[str, str] = OrderedDict()

    async def get(self, key: str) -> str | None:
        value = self._data.get(key)
        if value is not None:
            self._data.move_to_end(key)
        return value

    async def put(self, key: str, value: str) -> None:
        self._data[key] = value
        self._data.move_to_end(key)
        while len(self._data) > self.max_entries:
            self._data.popitem(last=False)


class RedisCompletionCache(CompletionCache):
    def __init__(self, url: str, *, ttl_s: int, prefix: str = "rubricate:judge:") -> None:
        self._redis: CancellableRedis = redis_client(url, timeout_s=2, client="judge_cache")
        self.ttl_s = ttl_s
        self.prefix = prefix

    async def get(self, key: str) -> str | None:
        return _text(await self._redis.get(self.prefix + key))

    async def put(self, key: str, value: str) -> None:
        await self._redis.set(self.prefix + key, value, ex=self.ttl_s)

    async def aclose(self) -> None:
        await self._redis.aclose()


def _text(value: bytes | str | None) -> str | None:
    return value.decode() if isinstance(value, bytes) else value


def cache_key(backend: LLMBackend, messages: Sequence[Message], params: GenerationParams) -> str:
    material = {
        "backend": backend.name,
        "model": backend.model,
        "messages": [[m.role, m.content] for m in messages],
        "params": asdict(params),
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()


def _dump(c: Completion) -> str:
    return json.dumps(
        {
            "text": c.text,
            "model": c.model,
            "backend": c.backend,
            "finish_reason": c.finish_reason,
            "logprobs": None
            if c.logprobs is None
            else [[t.token, t.logprob, t.top] for t in c.logprobs],
        }
    )


def _load(raw: str) -> Completion:
    data: dict[str, Any] = json.loads(raw)
    logprobs = data.get("logprobs")
    return Completion(
        text=data["text"],
        prompt_tokens=0,
        completion_tokens=0,
        latency_s=0.0,
        model=data["model"],
        backend=data["backend"],
        finish_reason=data.get("finish_reason"),
        logprobs=None
        if logprobs is None
        else tuple(TokenLogprob(token=t, logprob=lp, top=dict(top)) for t, lp, top in logprobs),
    )


class CachingBackend(WrappingBackend):
    """Wraps a backend; caches and coalesces its temperature-0 calls."""

    def __init__(self, inner: LLMBackend, cache: CompletionCache) -> None:
        super().__init__(inner)
        self.cache = cache
        self._in_flight: dict[str, asyncio.Future[Completion]] = {}

    async def complete(self, messages: Sequence[Message], params: GenerationParams) -> Completion:
        if params.temperature != 0.0:
            JUDGE_CACHE.labels("bypass").inc()
            return await self.inner.complete(messages, params)
        key = cache_key(self.inner, messages, params)
        waiting = self._in_flight.get(key)
        if waiting is not None:
            JUDGE_CACHE.labels("coalesced").inc()
            done = await asyncio.shield(waiting)
            return replace(done, prompt_tokens=0, completion_tokens=0, latency_s=0.0)
        try:
            raw = await self.cache.get(key)
        except Exception as exc:  # the cache is an optimization: never fail the call
            JUDGE_CACHE.labels("error").inc()
            log.warning("judge_cache.unavailable error=%s", type(exc).__name__)
            raw = None
        if raw is not None:
            JUDGE_CACHE.labels("hit").inc()
            return _load(raw)
        JUDGE_CACHE.labels("miss").inc()
        future: asyncio.Future[Completion] = asyncio.get_running_loop().create_future()
        self._in_flight[key] = future
        try:
            completion = await self.inner.complete(messages, params)
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: nobody waiting is not an error
            raise
        finally:
            self._in_flight.pop(key, None)
        future.set_result(completion)
        try:
            await self.cache.put(key, _dump(completion))
        except Exception as exc:
            JUDGE_CACHE.labels("error").inc()
            log.warning("judge_cache.unavailable error=%s", type(exc).__name__)
        return completion

    async def score_choices(
        self, messages: Sequence[Message], *, reply_prefix: str, choices: Sequence[str]
    ) -> ChoiceScores:
        """Not cached: one forward pass over a mostly KV-cached prompt costs little."""
        return await self.inner.score_choices(messages, reply_prefix=reply_prefix, choices=choices)

    async def aclose(self) -> None:
        await self.cache.aclose()
        await super().aclose()
