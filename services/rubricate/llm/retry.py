"""Retries of transport failures: exponential backoff with full jitter, and never sooner
than the server's Retry-After (at most `llm.limiter.MAX_PAUSE_S`) when it sent one."""

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import TypeVar

from rubricate.common.metrics import LLM_RETRIES
from rubricate.common.deadlines import time_left
from rubricate.common.usage import Usage
from rubricate.llm.errors import DeadlineExceeded, LLMError, TransportError
from rubricate.llm.limiter import MAX_PAUSE_S
from rubricate.llm.settings import LLMSettings

log = logging.getLogger("rubricate.llm.retry")

R = TypeVar("R")

Sleep = Callable[[float], Awaitable[None]]
OnRetry = Callable[[int, TransportError, float], None]
"""Called before each retry with (retry number from 1, the failure, the delay in seconds)."""


def backoff_delay(
    attempt: int, *, base_s: float, max_s: float, rand: Callable[[], float] = random.random
) -> float:
    """Full jitter: uniform in [0, min(max_s, base_s * 2**attempt)), `attempt` from 0."""
    cap = min(max_s, base_s * 2.0 ** min(attempt, 62))
    return rand() * cap


async def call_with_retries(
    fn: Callable[[], Awaitable[R]],
    *,
    max_retries: int,
    base_s: float,
    max_s: float,
    on_retry: OnRetry | None = None,
    sleep: Sleep = asyncio.sleep,
    rand: Callable[[], float] = random.random,
) -> R:
    """Await `fn()`, retrying `TransportError` up to `max_retries` times; other errors pass.

    The last `TransportError` is re-raised with the usage of every failed attempt merged.
    """
    spent = Usage()
    attempt = 0
    while True:
        try:
            return await fn()
        except TransportError as exc:
            spent.merge(exc.usage)
            if attempt >= max_retries:
                exc.usage = spent
                raise
            delay = backoff_delay(attempt, base_s=base_s, max_s=max_s, rand=rand)
            if exc.retry_after_s is not None and exc.status is not None:  # the server's
                delay = max(delay, min(exc.retry_after_s, MAX_PAUSE_S))
            attempt += 1
            if on_retry is not None:
                on_retry(attempt, exc, delay)
            await sleep(delay)


def ensure_time_left(task: str) -> None:
    """Raise `DeadlineExceeded` when the request being served has no time left: a judge
    call is not started for a caller that stopped waiting."""
    left = time_left()
    if left is not None and left <= 0:
        raise DeadlineExceeded(f"{task}: the request's deadline passed before the judge call")


async def sleep_within_deadline(delay: float) -> None:
    """`asyncio.sleep(delay)`, unless the request's deadline comes first: then
    `DeadlineExceeded` at once (a retry after the deadline would be work nobody awaits)."""
    left = time_left()
    if left is not None and delay >= left:
        raise DeadlineExceeded(
            f"the request's deadline leaves {max(left, 0.0):.2f}s, less than the "
            f"{delay:.2f}s backoff before the next retry"
        )
    await asyncio.sleep(delay)


async def retried(
    call: Callable[[], Awaitable[R]], *, task: str, backend: str, llm: LLMSettings, usage: Usage
) -> R:
    """`call()` under the retry policy of `llm`, each retry counted in the `task`'s retry
    metric and logged; a final failure carries `usage` (the request's cost so far) with
    the failed attempts merged in. No retry waits past the request's deadline."""

    def on_retry(n: int, exc: TransportError, delay: float) -> None:
        LLM_RETRIES.labels(task, "transport").inc()
        log.warning(
            "llm.retry task=%s backend=%s retry=%d delay_s=%.2f error=%s",
            task,
            backend,
            n,
            delay,
            exc,
        )

    try:
        return await call_with_retries(
            call,
            max_retries=llm.max_retries,
            base_s=llm.backoff_base_s,
            max_s=llm.backoff_max_s,
            on_retry=on_retry,
            sleep=sleep_within_deadline,
        )
    except LLMError as exc:
        usage.merge(exc.usage)
        exc.usage = replace(usage)
        raise
