"""Idempotency-Key: retried requests replay the first result and apply their writes once."""

import asyncio
import os
import uuid
from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import APIRouter
from pydantic import BaseModel
from starlette.middleware import Middleware

from rubricate.common.app import create_service_app
from rubricate.common.errors import ServiceError
from rubricate.gateway.idempotency import (
    IdempotencyMiddleware,
    IdempotencyStore,
    MemoryIdempotencyStore,
    RedisIdempotencyStore,
)
from rubricate.gateway.tenant_limits import TenantConcurrencyMiddleware
from tests.services.gateway.conftest import Running, trajectory

REDIS_URL = os.environ.get("RUBRICATE_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")


class Body(BaseModel):
    n: int


class Counter:
    def __init__(self) -> None:
        self.runs = 0
        self.fail_next = False
        self.gate: asyncio.Event | None = None


def make_client(store: IdempotencyStore, counter: Counter) -> httpx.AsyncClient:
    router = APIRouter()

    @router.post("/v1/apply")
    async def apply(body: Body) -> dict[str, int]:
        counter.runs += 1
        if counter.gate is not None:
            await counter.gate.wait()
        if counter.fail_next:
            counter.fail_next = False
            raise ServiceError(503, "upstream down", type="backend_unavailable")
        return {"n": body.n, "run": counter.runs}

    app = create_service_app(
        service="t",
        title="t",
        routers=[router],
        middleware=[Middleware(IdempotencyMiddleware, store=store, wait_s=5, poll_s=0.01)],
    )
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t")


@pytest.fixture(params=["memory", "redis"])
async def store(request: pytest.FixtureRequest) -> AsyncIterator[IdempotencyStore]:
    if request.param == "memory":
        yield MemoryIdempotencyStore()
        return
    s = RedisIdempotencyStore(REDIS_URL, prefix=f"test:{uuid.uuid4().hex}:")
    yield s
    await s.aclose()


def key() -> dict[str, str]:
    return {"Idempotency-Key": uuid.uuid4().hex}


async def test_retry_replays_the_first_result(store: IdempotencyStore) -> None:
    counter = Counter()
    async with make_client(store, counter) as c:
        h = key()
        first = await c.post("/v1/apply", json={"n": 1}, headers=h)
        again = await c.post("/v1/apply", json={"n": 1}, headers=h)
        assert first.status_code == again.status_code == 200
        assert first.json() == again.json() == {"n": 1, "run": 1}
        assert again.headers["idempotent-replayed"] == "true"
        assert counter.runs == 1
        # without a key, or with another key, it runs again
        await c.post("/v1/apply", json={"n": 1})
        await c.post("/v1/apply", json={"n": 1}, headers=key())
        assert counter.runs == 3


async def test_same_key_other_body_is_refused(store: IdempotencyStore) -> None:
    counter = Counter()
    async with make_client(store, counter) as c:
        h = key()
        await c.post("/v1/apply", json={"n": 1}, headers=h)
        r = await c.post("/v1/apply", json={"n": 2}, headers=h)
        assert r.status_code == 422
        assert r.json()["error"]["type"] == "idempotency_key_reused"
        assert r.json()["error"]["field"] == "Idempotency-Key"
        assert counter.runs == 1


async def test_concurrent_duplicates_run_once(store: IdempotencyStore) -> None:
    counter = Counter()
    counter.gate = asyncio.Event()
    async with make_client(store, counter) as c:
        h = key()
        first = asyncio.create_task(c.post("/v1/apply", json={"n": 5}, headers=h))
        second = asyncio.create_task(c.post("/v1/apply", json={"n": 5}, headers=h))
        await asyncio.sleep(0.2)
        counter.gate.set()
        a, b = await asyncio.gather(first, second)
        assert a.json() == b.json() == {"n": 5, "run": 1}
        assert counter.runs == 1


async def test_server_errors_are_not_kept(store: IdempotencyStore) -> None:
    counter = Counter()
    counter.fail_next = True
    async with make_client(store, counter) as c:
        h = key()
        failed = await c.post("/v1/apply", json={"n": 1}, headers=h)
        assert failed.status_code == 503
        retried = await c.post("/v1/apply", json={"n": 1}, headers=h)
        assert retried.status_code == 200 and retried.json() == {"n": 1, "run": 2}


async def test_stagewise_retry_does_not_update_the_buffer_twice(running: Running) -> None:
    body = {
        "question": "Why is the sky blue?",
        "rollouts": [
            {"id": "a", "trajectory": trajectory("[[excellent]]")},
            {"id": "b", "trajectory": trajectory("[[poor]]")},
        ],
    }
    h = key()
    first = await running.client.post("/v1/stagewise/score", json=body, headers=h)
    assert first.status_code == 200, first.text
    calls = len(running.backend.calls)
    buffer_before = (await running.client.get(f"/v1/buffers/{first.json()['question_id']}")).json()
    again = await running.client.post("/v1/stagewise/score", json=body, headers=h)
    assert again.status_code == 200
    assert again.json() == first.json()
    assert len(running.backend.calls) == calls  # no new generation or scoring call
    buffer_after = (await running.client.get(f"/v1/buffers/{first.json()['question_id']}")).json()
    assert buffer_after == buffer_before


async def test_tenant_concurrency_limit() -> None:
    gate = asyncio.Event()
    router = APIRouter()

    @router.post("/v1/slow")
    async def slow() -> dict[str, bool]:
        await gate.wait()
        return {"ok": True}

    app = create_service_app(
        service="t",
        title="t",
        routers=[router],
        middleware=[Middleware(TenantConcurrencyMiddleware, max_in_flight=1)],
    )
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
        a = asyncio.create_task(c.post("/v1/slow", headers={"X-Rubricate-Tenant": "t1"}))
        await asyncio.sleep(0.05)
        refused = await c.post("/v1/slow", headers={"X-Rubricate-Tenant": "t1"})
        assert refused.status_code == 429
        assert refused.headers["retry-after"] == "1"
        assert refused.json()["error"]["type"] == "too_many_requests"
        other = asyncio.create_task(c.post("/v1/slow", headers={"X-Rubricate-Tenant": "t2"}))
        await asyncio.sleep(0.05)
        gate.set()
        assert (await a).status_code == 200
        assert (await other).status_code == 200
        assert (await c.get("/healthz")).status_code == 200
