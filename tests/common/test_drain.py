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
