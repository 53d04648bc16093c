"""SIGTERM drains a service (issue 33, rolling upgrades): `/readyz` answers 503 `draining`
at once, the service's drain hooks run, and the handler installed before (uvicorn's, which
then stops the server and waits for the requests in flight) still runs."""

import asyncio
import signal
from types import FrameType

import httpx

from rubricate.common.app import Drain, create_service_app


async def test_sigterm_starts_the_drain_and_readiness_says_draining() -> None:
    seen: list[int] = []

    def previous(sig: int, frame: FrameType | None) -> None:  # stands in for uvicorn's
        seen.append(sig)

    hooked = asyncio.Event()

    async def hook() -> None:
        hooked.set()

    drain = Drain()
    drain.hooks.append(hook)
    app = create_service_app(service="t", title="t", routers=[], drain=drain)
    old = signal.signal(signal.SIGTERM, previous)
    try:
        async with (
            app.router.lifespan_context(app),
            httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c,
        ):
            assert (await c.get("/readyz")).status_code == 200
            signal.raise_signal(signal.SIGTERM)
            await asyncio.wait_for(hooked.wait(), 5)
            r = await c.get("/readyz")
            assert r.status_code == 503 and r.json()["status"] == "draining"
            assert (await c.get("/healthz")).status_code == 200  # alive while it drains
        assert seen == [signal.SIGTERM]
        assert signal.getsignal(signal.SIGTERM) is previous  # restored at shutdown
    finally:
        signal.signal(signal.SIGTERM, old)


async def test_a_shutdown_without_a_signal_runs_the_drain_once() -> None:
    runs: list[str] = []

    async def hook() -> None:
        runs.append("drained")

    drain = Drain()
    drain.hooks.append(hook)
    drain.start()
    await drain.finish()
    await drain.finish()
    assert runs == ["drained"]


async def test_a_hold_delays_the_server_stop_and_a_second_signal_ends_it() -> None:
    """The holds run while the server still takes connections: the handler installed before
    (uvicorn's) runs once they end, or at once on a second signal (the operator insists);
    the hooks run after it."""
    seen: list[int] = []

    def previous(sig: int, frame: FrameType | None) -> None:
        seen.append(sig)

    release = asyncio.Event()
    order: list[str] = []

    async def hold() -> None:
        order.append("hold")
        await release.wait()

    async def hook() -> None:
        order.append(f"hook after {len(seen)} stop(s)")

    drain = Drain()
    drain.holds.append(hold)
    drain.hooks.append(hook)
    app = create_service_app(service="t", title="t", routers=[], drain=drain)
    old = signal.signal(signal.SIGTERM, previous)
    try:
        async with (
            app.router.lifespan_context(app),
            httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c,
        ):
            signal.raise_signal(signal.SIGTERM)
            await asyncio.sleep(0.2)
            assert order == ["hold"] and seen == []  # held: the server still listens
            assert (await c.get("/readyz")).status_code == 503
            signal.raise_signal(signal.SIGTERM)  # a second signal: stop now
            await asyncio.sleep(0.2)
            assert seen == [signal.SIGTERM, signal.SIGTERM]
            assert order == ["hold", "hook after 2 stop(s)"]
    finally:
        signal.signal(signal.SIGTERM, old)
