"""Admission (`common.tenant_limits`): work queues within a tenant's budget of pending
rollouts and is refused past it with 429 and Retry-After; a request counts its rollouts."""

import asyncio
from collections.abc import Callable

import httpx
from fastapi import APIRouter, Request
from prometheus_client import REGISTRY
from starlette.middleware import Middleware

from rubricate.common.app import create_service_app
from rubricate.common.tenant_limits import TenantConcurrencyMiddleware, admit_rollouts


def slow_app(budget: int, gate: asyncio.Event) -> httpx.AsyncClient:
    router = APIRouter()

    @router.post("/v1/rollouts/{n}")
    async def rollouts(n: int, request: Request) -> dict[str, int]:
        admit_rollouts(request, n)
        await gate.wait()
        return {"n": n}

    app = create_service_app(
        service="t",
        title="t",
        routers=[router],
        middleware=[Middleware(TenantConcurrencyMiddleware, max_in_flight=budget)],
    )
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t")


def pending() -> float:
    return REGISTRY.get_sample_value("rubricate_pending_rollouts") or 0.0


async def until(check: Callable[[], bool]) -> None:
    for _ in range(500):
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition never held")


async def test_work_queues_within_the_budget_and_is_refused_past_it() -> None:
    gate = asyncio.Event()
    before = pending()
    async with slow_app(30, gate) as client:
        t1 = {"X-Rubricate-Tenant": "t1"}
        waiting = [
            asyncio.create_task(client.post("/v1/rollouts/3", headers=t1)) for _ in range(10)
        ]
        await until(lambda: pending() - before == 30)
        refused = await client.post("/v1/rollouts/1", headers=t1)
        assert refused.status_code == 429
        assert refused.headers["retry-after"] == "1"
        error = refused.json()["error"]
        assert error["type"] == "too_many_requests" and "budget 30" in error["message"]
        # another tenant has a budget of its own
        other = asyncio.create_task(
            client.post("/v1/rollouts/30", headers={"X-Rubricate-Tenant": "t2"})
        )
        await until(lambda: pending() - before == 60)
        gate.set()
        answers = await asyncio.gather(*waiting, other)
        assert [a.status_code for a in answers] == [200] * 11
        again = await client.post("/v1/rollouts/30", headers=t1)
        assert again.status_code == 200
    assert pending() == before


async def test_a_request_larger_than_the_budget_is_admitted_alone() -> None:
    gate = asyncio.Event()
    async with slow_app(4, gate) as client:
        big = asyncio.create_task(client.post("/v1/rollouts/9"))
        await until(lambda: pending() >= 9)
        small = await client.post("/v1/rollouts/1")
        assert small.status_code == 429  # the big one holds the tenant's whole budget
        gate.set()
        assert (await big).status_code == 200


async def test_a_refused_request_gives_back_what_it_held() -> None:
    gate = asyncio.Event()
    before = pending()
    async with slow_app(4, gate) as client:
        first = asyncio.create_task(client.post("/v1/rollouts/3"))
        await until(lambda: pending() - before == 3)
        refused = await client.post("/v1/rollouts/2")  # held 1 on arrival, 2 do not fit
        assert refused.status_code == 429
        assert pending() - before == 3
        gate.set()
        assert (await first).status_code == 200
    assert pending() == before
