"""The one retry rule of the LLM layer (the lower of its two call layers; `llm.calls` is the
upper): transport failures are retried with exponential backoff and full jitter, never
sooner than the server's Retry-After (at most `llm.limiter.MAX_PAUSE_S`) when it sent one,
each retry counted and logged once (`retry_logger`), and no retry waits past the request's
deadline (`sleep_within_deadline`). A call that meets an open circuit (`llm.circuit`) waits
for the circuit's trial call in the same way, instead of spending its retries in the
cooldown."""

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import TypedDict, TypeVar

from rubricate.common.deadlines import time_left
from rubricate.common.metrics import LLM_RETRIES
from rubricate.common.usage import Usage
from rubricate.llm.errors import DeadlineExceeded, LLMError, TransportError
from rubricate.llm.limiter import MAX_PAUSE_S
from rubricate.llm.settings import LLMSettings

log = logging.getLogger("rubricate.llm.retry")

R = TypeVar("R")

Sleep = Callable[[float], Awaitable[None]]
OnRetry = Callable[[int, TransportError, float], None]
"""Called before each retry with (retry number from 1, the failure, the delay in seconds)."""


class RetryArgs(TypedDict):
    """The retry policy as `llm.calls` takes it (keyword arguments of each judge call)."""

    max_retries: int
    backoff_base_s: float
    backoff_max_s: float
    sleep: Sleep


def retry_args(llm: LLMSettings) -> RetryArgs:
    """The policy of `llm` (RUBRICATE_LLM_MAX_RETRIES, _BACKOFF_BASE_S, _BACKOFF_MAX_S),
    with retries that never wait past the request's deadline."""
    return RetryArgs(
        max_retries=llm.max_retries,
        backoff_base_s=llm.backoff_base_s,
        backoff_max_s=llm.backoff_max_s,
        sleep=sleep_within_deadline,
    )


def backoff_delay(
    attempt: int,
    *,
    base_s: float,
    max_s: float,
    retry_after_s: float | None = None,
    rand: Callable[[], float] = random.random,
) -> float:
    """Full jitter: uniform in [0, min(max_s, base_s * 2**attempt)), `attempt` from 0; at
    least `retry_after_s` (capped at `MAX_PAUSE_S`) when the server asked for it."""
    cap = min(max_s, base_s * 2.0 ** min(attempt, 62))
    delay = rand() * cap
    if retry_after_s is not None:
        delay = max(delay, min(retry_after_s, MAX_PAUSE_S))
    return delay


async def call_with_retries(
    fn: Callable[[], Awaitable[R]],
    *,
    max_retries: int,
    base_s: float,
    max_s: float,
    on_retry: OnRetry | None = None,
    sleep: Sleep = asyncio.sleep,
    rand: Callable[[], float] = random.random,
    usage: Usage | None = None,
) -> R:
    """Await `fn()`, retrying `TransportError` up to `max_retries` times; other errors pass.

    The last `TransportError` is re-raised with the usage of every failed attempt merged.
    With `usage` (the request's account so far), a final `LLMError` of any kind is merged
    into it and carries a snapshot of the whole (a failure still reports its cost).
    """
    spent = Usage()
    attempt = 0
    try:
        while True:
            try:
                return await fn()
            except TransportError as exc:
                spent.merge(exc.usage)
                if attempt >= max_retries:
                    exc.usage = spent
                    raise
                delay = backoff_delay(
                    attempt,
                    base_s=base_s,
                    max_s=max_s,
                    # a server's Retry-After, or an open circuit's wait for its trial call
                    # (without it the retries were spent within the cooldown: a judge down
                    # 20 s left most of a 4,096-rollout step unscored)
                    retry_after_s=exc.retry_after_s,
                    rand=rand,
                )
                attempt += 1
                if on_retry is not None:
                    on_retry(attempt, exc, delay)
                await sleep(delay)
    except LLMError as exc:
        if usage is not None:
            usage.merge(exc.usage)
            exc.usage = replace(usage)
        raise


def retry_logger(task: str, backend: str, max_retries: int) -> OnRetry:
    """Each retry of a `task`'s call counted in the retry metric and logged."""

    def on_retry(n: int, exc: TransportError, delay: float) -> None:
        LLM_RETRIES.labels(task, "transport").inc()
        log.warning(
            "llm.retry task=%s backend=%s retry=%d/%d delay_s=%.2f error=%s",
            task,
            backend,
            n,
            max_retries,
            delay,
            exc,
        )

    return on_retry


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
