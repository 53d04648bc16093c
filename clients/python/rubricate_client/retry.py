"""Retries: only 429, 5xx and transport failures (timeouts, refused connections); exponential
backoff with jitter; a server's `Retry-After` is honoured (capped)."""

import asyncio
import email.utils
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TypeVar

from rubricate_client.errors import APIError, RubricateError, TransportError

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 3
    """Retries after the first attempt (0: no retries)."""
    backoff_base_s: float = 0.5
    backoff_max_s: float = 30.0
    jitter: float = 0.5
    """Fraction of each backoff that is random: the wait is drawn from
    [(1 - jitter) * b, b] with b = min(backoff_max_s, backoff_base_s * 2**retry)."""
    max_retry_after_s: float = 300.0
    """A longer `Retry-After` is cut to this."""
    rng: Callable[[], float] = field(default=random.random, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        if self.backoff_base_s < 0 or self.backoff_max_s < 0 or self.max_retry_after_s < 0:
            raise ValueError("backoff and Retry-After limits must be >= 0")
        if not 0.0 <= self.jitter <= 1.0:
            raise ValueError("jitter must be in [0, 1]")

    def delay(self, retry: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry number `retry` (0-based)."""
        if retry_after is not None:
            return min(max(0.0, retry_after), self.max_retry_after_s)
        base = min(self.backoff_max_s, self.backoff_base_s * 2**retry)
        return float(base * (1.0 - self.jitter * self.rng()))


def retryable(exc: BaseException) -> bool:
    return isinstance(exc, APIError | TransportError) and exc.retryable


def retry_after_of(exc: BaseException) -> float | None:
    return exc.retry_after if isinstance(exc, APIError) else None


def parse_retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """Seconds from a `Retry-After` value: delta-seconds or an HTTP date; None if invalid."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - (now or datetime.now(timezone.utc))).total_seconds())


def run_sync(policy: RetryPolicy, attempt: Callable[[], T]) -> T:
    retry = 0
    while True:
        try:
            return attempt()
        except RubricateError as exc:
            if not retryable(exc) or retry >= policy.max_retries:
                raise
            time.sleep(policy.delay(retry, retry_after_of(exc)))
            retry += 1


async def run_async(policy: RetryPolicy, attempt: Callable[[], Awaitable[T]]) -> T:
    retry = 0
    while True:
        try:
            return await attempt()
        except RubricateError as exc:
            if not retryable(exc) or retry >= policy.max_retries:
                raise
            await asyncio.sleep(policy.delay(retry, retry_after_of(exc)))
            retry += 1
