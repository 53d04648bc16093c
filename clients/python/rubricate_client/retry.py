"""Retries: only 429, 5xx and transport failures (timeouts, refused connections); exponential
backoff with jitter; a server's `Retry-After` is honoured (capped). `max_retries` tries
again, and with `retry_for_s` a retryable failure is tried again for that long from the first
attempt as well (the trainer adapters' policy rides out a platform outage of minutes)."""

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
    retry_for_s: float = 0.0
    """A retryable failure is also retried after `max_retries` while less than this many
    seconds have passed since the first attempt (the wait before a retry must end within
    it); 0: `max_retries` alone. The trainer adapters set it (`TRAINER_RETRY`): a reward
    call waits out an outage (a Redis or gateway restart) instead of failing the step."""
    rng: Callable[[], float] = field(default=random.random, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        if self.backoff_base_s < 0 or self.backoff_max_s < 0 or self.max_retry_after_s < 0:
            raise ValueError("backoff and Retry-After limits must be >= 0")
        if self.retry_for_s < 0:
            raise ValueError("retry_for_s must be >= 0")
        if not 0.0 <= self.jitter <= 1.0:
            raise ValueError("jitter must be in [0, 1]")

    def delay(self, retry: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry number `retry` (0-based)."""
        if retry_after is not None:
            return min(max(0.0, retry_after), self.max_retry_after_s)
        base = min(self.backoff_max_s, self.backoff_base_s * 2**retry)
        return float(base * (1.0 - self.jitter * self.rng()))

    def next_delay(self, retry: int, exc: BaseException, *, elapsed_s: float) -> float | None:
        """Seconds to wait before retry number `retry` after `exc`, `elapsed_s` after the
        first attempt began; None: give up (not retryable, or retries and time spent)."""
        if not retryable(exc):
            return None
        wait = self.delay(retry, retry_after_of(exc))
        if retry < self.max_retries or elapsed_s + wait < self.retry_for_s:
            return wait
        return None


TRAINER_RETRY = RetryPolicy(max_retries=3, backoff_max_s=5.0, retry_for_s=300.0)
"""The trainer adapters' policy (the veRL, OpenRLHF and TRL reward functions and the veRL
reward manager; not `trainers.get_reward_or_fail`, whose callers, NeMo Gym and verifiers,
have a failure outcome of their own): 3 retries at least, and any
retryable failure tried again for 5 minutes from the first attempt, at most 5 s apart unless
the server's `Retry-After` says otherwise. A reward call that fails fails the trainer's step,
and the gateway's groups wait for the sample (issue 33: 3 retries, 6 s with the gateway's
Retry-After of 2 s, ran out within a 30 s Redis outage)."""


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
    retry, began = 0, time.monotonic()
    while True:
        try:
            return attempt()
        except RubricateError as exc:
            wait = policy.next_delay(retry, exc, elapsed_s=time.monotonic() - began)
            if wait is None:
                raise
            time.sleep(wait)
            retry += 1


async def run_async(policy: RetryPolicy, attempt: Callable[[], Awaitable[T]]) -> T:
    retry, began = 0, time.monotonic()
    while True:
        try:
            return await attempt()
        except RubricateError as exc:
            wait = policy.next_delay(retry, exc, elapsed_s=time.monotonic() - began)
            if wait is None:
                raise
            await asyncio.sleep(wait)
            retry += 1
