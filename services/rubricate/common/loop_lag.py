"""Event-loop lag: how late the loop runs a timer, exported as a Prometheus histogram.

A task that sleeps `interval_s` should wake `interval_s` later; it wakes later still when the
loop is busy running other callbacks (JSON encoding, validation, a blocking call): that
excess is the time any ready coroutine of the service waits for the loop. `LoopLagMonitor`
samples it every `interval_s` into `rubricate_event_loop_lag_seconds{service}`
(`common.metrics.EVENT_LOOP_LAG`) and keeps the worst value seen (`max_s`). Every service
started by `common.app.create_service_app` runs one for its lifespan
(`RUBRICATE_HTTP_LOOP_LAG_INTERVAL_S`, 0 turns it off); the RL-step benchmark reads the
gateway's p99 from `/metrics`.
"""

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from types import TracebackType

from fastapi import FastAPI

from rubricate.common.metrics import EVENT_LOOP_LAG

Lifespan = Callable[[FastAPI], AbstractAsyncContextManager[None]]

DEFAULT_INTERVAL_S = 0.05


class LoopLagMonitor:
    """`async with LoopLagMonitor("gateway"):` samples the running loop's lag until exit."""

    def __init__(self, service: str, *, interval_s: float = DEFAULT_INTERVAL_S) -> None:
        if interval_s <= 0:
            raise ValueError("interval_s must be positive")
        self.service = service
        self.interval_s = interval_s
        self.samples = 0
        self.max_s = 0.0
        self._task: asyncio.Task[None] | None = None

    def observe(self, lag_s: float) -> None:
        lag_s = max(0.0, lag_s)
        self.samples += 1
        self.max_s = max(self.max_s, lag_s)
        EVENT_LOOP_LAG.labels(self.service).observe(lag_s)

    async def _run(self) -> None:
        while True:
            expected = time.perf_counter() + self.interval_s
            await asyncio.sleep(self.interval_s)
            self.observe(time.perf_counter() - expected)

    async def __aenter__(self) -> "LoopLagMonitor":
        self._task = asyncio.create_task(self._run(), name=f"loop-lag-{self.service}")
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        task, self._task = self._task, None
        if task is None:
            return
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise  # the caller itself is being cancelled, not only the sampler


def with_loop_lag(
    service: str, lifespan: Lifespan | None, *, interval_s: float = DEFAULT_INTERVAL_S
) -> Lifespan:
    """`lifespan` (or none) with a `LoopLagMonitor` around it."""

    @contextlib.asynccontextmanager
    async def wrapped(app: FastAPI) -> AsyncIterator[None]:
        async with LoopLagMonitor(service, interval_s=interval_s):
            if lifespan is None:
                yield
            else:
                async with lifespan(app):
                    yield

    return wrapped
