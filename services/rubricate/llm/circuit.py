"""A circuit breaker per model backend: after repeated transport failures, fail fast.

Closed: calls pass; `failure_threshold` transport failures in a row open it (a 429 is not
one: the server is up and asks for fewer calls, which the call limiter gives it). Open: calls
fail at once with a `TransportError` naming the wait (the model server answers 503 with
Retry-After) instead of piling timeouts onto a dead server. After `cooldown_s` one trial call
passes (half-open): success closes the circuit, failure opens it again.
"""

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from rubricate.common.metrics import CIRCUIT_OPEN
from rubricate.llm.base import (
    ChoiceScores,
    Completion,
    GenerationParams,
    LLMBackend,
    Message,
    WrappingBackend,
)
from rubricate.llm.errors import TransportError

log = logging.getLogger("rubricate.llm.circuit")

_T = TypeVar("_T")


class CircuitOpenError(TransportError):
    """The backend's circuit is open; `retry_after_s` says when a trial call is allowed."""

    retry_after_s: float

    def __init__(self, message: str, *, retry_after_s: float) -> None:
        super().__init__(message, retry_after_s=retry_after_s)


class CircuitBreakerBackend(WrappingBackend):
    def __init__(
        self,
        inner: LLMBackend,
        *,
        failure_threshold: int = 5,
        cooldown_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if failure_threshold < 1 or cooldown_s <= 0:
            raise ValueError("failure_threshold must be >= 1 and cooldown_s > 0")
        super().__init__(inner)
        self.failure_threshold = failure_threshold
        self.cooldown_s = cooldown_s
        self._clock = clock
        self._failures = 0
        self._opened_at: float | None = None
        self._trial = asyncio.Lock()
        CIRCUIT_OPEN.labels(self.name).set(0)

    @property
    def state(self) -> str:
        if self._opened_at is None:
            return "closed"
        return "half_open" if self._clock() - self._opened_at >= self.cooldown_s else "open"

    async def complete(self, messages: Sequence[Message], params: GenerationParams) -> Completion:
        return await self._guarded(lambda: self.inner.complete(messages, params))

    async def score_choices(
        self, messages: Sequence[Message], *, reply_prefix: str, choices: Sequence[str]
    ) -> ChoiceScores:
        return await self._guarded(
            lambda: self.inner.score_choices(messages, reply_prefix=reply_prefix, choices=choices)
        )

    async def _guarded(self, call: Callable[[], Awaitable[_T]]) -> _T:
        state = self.state
        if state == "open":
            assert self._opened_at is not None
            wait = self.cooldown_s - (self._clock() - self._opened_at)
            raise CircuitOpenError(
                f"circuit open for the {self.name} backend after {self._failures} transport "
                f"failures in a row; next trial in {wait:.0f}s",
                retry_after_s=max(wait, 0.0),
            )
        if state == "half_open":
            if self._trial.locked():
                raise CircuitOpenError(
                    f"circuit half-open for the {self.name} backend: a trial call is running",
                    retry_after_s=1.0,
                )
            async with self._trial:
                return await self._call(call)
        return await self._call(call)

    async def _call(self, call: Callable[[], Awaitable[_T]]) -> _T:
        try:
            result = await call()
        except TransportError as exc:
            if exc.status == 429:
                # the server is up and asks for less: the call limiter backs off
                # (`llm.limiter`), the circuit neither opens nor closes on it
                raise
            self._failures += 1
            if self._failures >= self.failure_threshold or self._opened_at is not None:
                if self._opened_at is None:
                    log.warning("circuit.open backend=%s failures=%d", self.name, self._failures)
                self._opened_at = self._clock()
                CIRCUIT_OPEN.labels(self.name).set(1)
            raise
        if self._opened_at is not None:
            log.info("circuit.closed backend=%s", self.name)
        self._failures = 0
        self._opened_at = None
        CIRCUIT_OPEN.labels(self.name).set(0)
        return result

    async def ready(self) -> bool:
        return self.state != "open" and await self.inner.ready()
