"""The event-loop lag sampler (`common.loop_lag`) and its wiring in `create_service_app`."""

import asyncio
import time

import pytest

from rubricate.common.app import create_service_app
from rubricate.common.loop_lag import LoopLagMonitor
from rubricate.common.metrics import EVENT_LOOP_LAG


def samples(service: str) -> float:
    """Observations so far of `service`'s lag histogram."""
    return sum(bucket.get() for bucket in EVENT_LOOP_LAG.labels(service)._buckets)


async def test_a_blocked_loop_shows_as_lag() -> None:
    async with LoopLagMonitor("test-blocked", interval_s=0.01) as monitor:
        await asyncio.sleep(0.05)
        time.sleep(0.2)  # noqa: ASYNC251 - the point: the loop cannot run the sampler
        await asyncio.sleep(0.05)
    assert monitor.samples >= 2
    assert monitor.max_s >= 0.1
    assert samples("test-blocked") == monitor.samples


async def test_the_sampler_stops_with_its_context() -> None:
    async with LoopLagMonitor("test-stops", interval_s=0.01) as monitor:
        await asyncio.sleep(0.05)
    seen = monitor.samples
    await asyncio.sleep(0.05)
    assert monitor.samples == seen


async def test_every_service_app_samples_its_loop_for_its_lifespan(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RUBRICATE_HTTP_LOOP_LAG_INTERVAL_S", "0.01")
    app = create_service_app(service="test-app", title="t", routers=[])
    before = samples("test-app")
    async with app.router.lifespan_context(app):
        await asyncio.sleep(0.1)
    during = samples("test-app")
    assert during > before
    await asyncio.sleep(0.05)
    assert samples("test-app") == during


async def test_zero_turns_the_sampler_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RUBRICATE_HTTP_LOOP_LAG_INTERVAL_S", "0")
    app = create_service_app(service="test-off", title="t", routers=[])
    async with app.router.lifespan_context(app):
        await asyncio.sleep(0.05)
    assert samples("test-off") == 0
