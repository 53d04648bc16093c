"""Retries of transport failures: exponential backoff with full jitter."""

import asyncio
import random
from collections.abc import Awaitable, Callable
from typing import TypeVar

from rubricate.llm.errors import TransportError
from rubricate.llm.usage import Usage

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
            attempt += 1
            if on_retry is not None:
                on_retry(attempt, exc, delay)
            await sleep(delay)
