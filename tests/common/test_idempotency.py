"""Idempotency-Key: retried requests replay the first result and apply their writes once."""

import asyncio
import hashlib
import os
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import redis
from fastapi import APIRouter
from prometheus_client import REGISTRY
from pydantic import BaseModel
from starlette.middleware import Middleware

from rubricate.common.app import create_service_app
from rubricate.common.errors import ServiceError
from rubricate.common.idempotency import (
    IdempotencyMiddleware,
    IdempotencyStore,
    MemoryIdempotencyStore,
    RedisIdempotencyStore,
    Stored,
    fingerprints,
    pending_marker,
)
from rubricate.common.tenant_limits import TenantConcurrencyMiddleware
from tests.support.gateway import Running, trajectory
from tests.support.servers import TempRedis

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


# --- issue 17: canonical JSON bodies, leases a dead owner's key lapses from, a guarded store


def make_app_client(store: IdempotencyStore, counter: Counter, **kw: Any) -> httpx.AsyncClient:
    router = APIRouter()

    @router.post("/v1/apply")
    async def apply(body: Body) -> dict[str, int]:
        counter.runs += 1
        if counter.gate is not None:
            await counter.gate.wait()
        return {"n": body.n, "run": counter.runs}

    options: dict[str, Any] = {"wait_s": 10, "poll_s": 0.01, **kw}
    app = create_service_app(
        service="t",
        title="t",
        routers=[router],
        middleware=[Middleware(IdempotencyMiddleware, store=store, **options)],
    )
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t")


def stored_key(idem: str, path: str = "/v1/apply", tenant: str = "default") -> str:
    return hashlib.sha256(f"{tenant}\0{path}\0{idem}".encode()).hexdigest()


async def test_same_json_in_another_key_order_or_spacing_is_the_same_body(
    store: IdempotencyStore,
) -> None:
    counter = Counter()
    async with make_app_client(store, counter) as c:
        h = {**key(), "Content-Type": "application/json"}
        first = await c.post(
            "/v1/apply", content=b'{"n": 3, "extra": {"b": 1, "a": [1, 2]}}', headers=h
        )
        again = await c.post("/v1/apply", content=b'{"extra":{"a":[1,2],"b":1},"n":3}\n', headers=h)
        assert first.status_code == again.status_code == 200, again.text
        assert again.headers["idempotent-replayed"] == "true"
        assert counter.runs == 1
        # a different value is still a different body
        other = await c.post("/v1/apply", content=b'{"extra":{"a":[2,1],"b":1},"n":3}', headers=h)
        assert other.status_code == 422
        assert other.json()["error"]["type"] == "idempotency_key_reused"


def test_fingerprints_of_json_and_other_bodies() -> None:
    a, same_a = fingerprints(b'{"b": 1, "a": 2}', b"application/json; charset=utf-8")
    b, _ = fingerprints(b'{"a":2,"b":1}', None)
    assert a == b and a.startswith("json:")
    assert hashlib.sha256(b'{"b": 1, "a": 2}').hexdigest() in same_a  # results kept before
    raw, same = fingerprints(b"not json", b"application/json")
    assert same == {raw}
    text, _ = fingerprints(b'{"a":2,"b":1}', b"text/plain")
    assert not text.startswith("json:")


async def test_a_dead_owners_pending_key_is_taken_over_after_the_lease(
    store: IdempotencyStore,
) -> None:
    """A gateway crashed mid-request: its pending marker is never renewed nor released."""
    counter = Counter()
    idem = uuid.uuid4().hex
    fingerprint, _ = fingerprints(b'{"n":4}', b"application/json")
    dead = pending_marker(fingerprint, "crashed-owner")
    assert await store.claim(stored_key(idem), dead, lease_s=0.6) is None
    async with make_app_client(store, counter, lease_s=0.6) as c:
        started = time.monotonic()
        r = await c.post("/v1/apply", json={"n": 4}, headers={"Idempotency-Key": idem})
        waited = time.monotonic() - started
        assert r.status_code == 200, r.text
        assert r.json() == {"n": 4, "run": 1}
        assert waited < 5, waited  # the lease, not the model timeout (nor 24 h)
        replay = await c.post("/v1/apply", json={"n": 4}, headers={"Idempotency-Key": idem})
        assert replay.headers["idempotent-replayed"] == "true"
        assert counter.runs == 1


async def test_a_live_owner_renews_its_lease_so_a_retry_waits_for_it(
    store: IdempotencyStore,
) -> None:
    counter = Counter()
    counter.gate = asyncio.Event()
    async with make_app_client(store, counter, lease_s=0.3) as c:
        h = key()
        first = asyncio.create_task(c.post("/v1/apply", json={"n": 6}, headers=h))
        await asyncio.sleep(0.1)
        second = asyncio.create_task(c.post("/v1/apply", json={"n": 6}, headers=h))
        await asyncio.sleep(1.2)  # four leases: only renewal keeps the key pending
        assert counter.runs == 1
        counter.gate.set()
        a, b = await asyncio.gather(first, second)
        assert a.json() == b.json() == {"n": 6, "run": 1}
        assert b.headers["idempotent-replayed"] == "true"
        assert counter.runs == 1


class FlakyStore(MemoryIdempotencyStore):
    """Reachable for the claim, then every write fails as a dropped Redis would."""

    def __init__(self, failing: set[str]) -> None:
        super().__init__()
        self.failing = failing

    def _fail(self, op: str) -> None:
        if op in self.failing:
            raise redis.ConnectionError(f"Error 111 connecting to redis ({op})")

    async def claim(self, key: str, marker: str, *, lease_s: float) -> str | None:
        self._fail("claim")
        return await super().claim(key, marker, lease_s=lease_s)

    async def get(self, key: str) -> str | None:
        self._fail("get")
        return await super().get(key)

    async def renew(self, key: str, marker: str, *, lease_s: float) -> bool:
        self._fail("renew")
        return await super().renew(key, marker, lease_s=lease_s)

    async def put(self, key: str, value: Stored, *, ttl_s: int) -> None:
        self._fail("put")
        await super().put(key, value, ttl_s=ttl_s)

    async def release(self, key: str, marker: str) -> None:
        self._fail("release")
        await super().release(key, marker)


def store_errors(op: str) -> float:
    return REGISTRY.get_sample_value("rubricate_idempotency_store_errors_total", {"op": op}) or 0.0


async def test_a_store_failing_on_claim_is_a_clean_503() -> None:
    """A store that stays unreachable past the hold (`outage_s`): a 503 with Retry-After,
    after the claim was tried again through the hold (0.1 s doubling)."""
    before = store_errors("claim")
    began = time.monotonic()
    async with make_app_client(FlakyStore({"claim"}), Counter(), outage_s=0.5) as c:
        r = await c.post("/v1/apply", json={"n": 1}, headers=key())
    assert r.status_code == 503
    assert time.monotonic() - began >= 0.3
    assert r.headers["retry-after"]
    assert r.json()["error"]["type"] == "idempotency_unavailable"
    assert "Error 111" not in r.json()["error"]["message"]
    assert store_errors("claim") >= before + 3


async def test_a_keyed_request_sent_while_redis_is_down_waits_for_it() -> None:
    """Issue 33: Redis is down when a keyed request arrives and back 1.5 s later. The claim
    is held through the outage and the request runs once Redis answers (before: a 503 at
    once, and the SDK's retries, 2 s apart, ran out within a 30 s outage; the sample never
    joined its group, which was scored partial 600 s later)."""
    counter = Counter()
    with TempRedis() as server:
        store = RedisIdempotencyStore(server.url, timeout_s=1.0)
        try:
            async with make_app_client(store, counter, lease_s=5.0) as c:
                warm = await c.post("/v1/apply", json={"n": 1}, headers=key())  # a pooled
                assert warm.status_code == 200  # connection the restart leaves stale
                await asyncio.to_thread(server.kill)
                h = key()
                held = asyncio.create_task(c.post("/v1/apply", json={"n": 10}, headers=h))
                await asyncio.sleep(1.5)
                assert not held.done()
                await asyncio.to_thread(server.start)
                r = await asyncio.wait_for(held, 15)
                assert r.status_code == 200, r.text
                assert r.json() == {"n": 10, "run": 2}
                again = await c.post("/v1/apply", json={"n": 10}, headers=h)
                assert again.headers["idempotent-replayed"] == "true"
                assert counter.runs == 2
        finally:
            await store.aclose()


class LostAnswerStore(MemoryIdempotencyStore):
    """The first claim is applied, then its answer is lost (the connection dropped)."""

    def __init__(self) -> None:
        super().__init__()
        self.lost = False

    async def claim(self, key: str, marker: str, *, lease_s: float) -> str | None:
        out = await super().claim(key, marker, lease_s=lease_s)
        if not self.lost and not key.startswith("live:"):
            self.lost = True
            raise redis.ConnectionError("Connection closed by server.")
        return out


async def test_a_claim_whose_answer_was_lost_runs_the_request() -> None:
    """The claim tried again after its answer was lost finds its own pending marker: the
    request holds the key and runs (not a wait on itself until a 409)."""
    counter = Counter()
    async with make_app_client(LostAnswerStore(), counter, wait_s=3.0) as c:
        r = await asyncio.wait_for(c.post("/v1/apply", json={"n": 11}, headers=key()), 2.5)
    assert r.status_code == 200, r.text
    assert counter.runs == 1


class HeldClaimStore(MemoryIdempotencyStore):
    """The first claim is applied, then its answer is held back until `answered` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.ran = asyncio.Event()
        self.answered = asyncio.Event()

    async def claim(self, key: str, marker: str, *, lease_s: float) -> str | None:
        out = await super().claim(key, marker, lease_s=lease_s)
        if not self.ran.is_set() and not key.startswith("live:"):
            self.ran.set()
            await self.answered.wait()
        return out


async def test_a_request_cancelled_while_its_claim_is_answered_gives_the_key_back() -> None:
    """The claim ran and its caller was cancelled before the answer came (its deadline, a
    closed connection): the key it holds is given back, so the retry runs at once instead
    of waiting on a pending entry of this live replica until it expires."""
    counter, store = Counter(), HeldClaimStore()
    headers = key()
    async with make_app_client(store, counter, wait_s=10.0) as c:
        first = asyncio.create_task(c.post("/v1/apply", json={"n": 12}, headers=headers))
        await asyncio.wait_for(store.ran.wait(), 2)
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        store.answered.set()
        retry = await asyncio.wait_for(c.post("/v1/apply", json={"n": 12}, headers=headers), 3.0)
    assert retry.status_code == 200, retry.text
    assert counter.runs == 1


async def test_a_store_failing_after_the_response_never_escapes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Keeping, renewing or releasing fails after the handler ran: the client still gets
    the handler's answer (an escaping ConnectionError would drop the connection). The result
    is written twice at once (a restarted Redis fails the first command on each pooled
    connection) and never released instead (the key would run again)."""
    counter = Counter()
    counter.gate = asyncio.Event()
    store = FlakyStore({"put", "release", "renew"})
    before = {op: store_errors(op) for op in ("put", "release", "renew")}
    async with make_app_client(store, counter, lease_s=0.15) as c:
        task = asyncio.create_task(c.post("/v1/apply", json={"n": 2}, headers=key()))
        await asyncio.sleep(0.2)  # one renewal fails meanwhile
        counter.gate.set()
        r = await task
    assert r.status_code == 200 and r.json() == {"n": 2, "run": 1}
    assert store_errors("put") == before["put"] + 2
    assert store_errors("release") == before["release"]
    assert store_errors("renew") >= before["renew"] + 1
    assert any("idempotency.put_failed" in rec.getMessage() for rec in caplog.records)


async def test_redis_killed_mid_request_then_restarted() -> None:
    """A real Redis dies while the first request runs: that request's answer still arrives,
    a retry while Redis is down is replayed from the replica that holds the result (it
    could not write it), and after the restart the result is written and replayed: the
    request ran once. Another key while Redis is down is a 503 with Retry-After."""
    counter = Counter()
    counter.gate = asyncio.Event()
    with TempRedis() as server:
        store = RedisIdempotencyStore(server.url, timeout_s=1.0)
        try:
            async with make_app_client(store, counter, lease_s=1.0) as c:
                h = key()
                first = asyncio.create_task(c.post("/v1/apply", json={"n": 8}, headers=h))
                await asyncio.sleep(0.2)
                await asyncio.to_thread(server.kill)
                counter.gate.set()
                done = await asyncio.wait_for(first, 30)
                assert done.status_code == 200, done.text
                held = await c.post("/v1/apply", json={"n": 8}, headers=h)
                assert held.status_code == 200, held.text
                assert held.headers["idempotent-replayed"] == "true"
                down = await c.post("/v1/apply", json={"n": 8}, headers=key())
                assert down.status_code == 503, down.text
                assert down.headers["retry-after"]
                assert down.json()["error"]["type"] == "idempotency_unavailable"

                await asyncio.to_thread(server.start)
                back = await c.post("/v1/apply", json={"n": 8}, headers=h)
                assert back.status_code == 200, back.text
                assert back.headers["idempotent-replayed"] == "true"
                assert back.json() == {"n": 8, "run": 1}
                again = await c.post("/v1/apply", json={"n": 8}, headers=h)
                assert again.headers["idempotent-replayed"] == "true"
                assert counter.runs == 1
        finally:
            await store.aclose()


@pytest.mark.parametrize("down_s", [0.0, 1.0])
async def test_redis_restarted_mid_request_then_the_retry_replays_the_first_result(
    down_s: float,
) -> None:
    """Issue 33: Redis restarts (without its data) while a keyed request runs, and is back
    (`down_s` 0) or still down (1 s) when the request ends. The request's answer arrives,
    and a retry with the same key and body right afterwards replays it: the result written
    while Redis was away is settled before the key can run again (one run)."""
    counter = Counter()
    counter.gate = asyncio.Event()
    with TempRedis() as server:
        store = RedisIdempotencyStore(server.url, timeout_s=1.0)
        try:
            async with make_app_client(store, counter, lease_s=3.0) as c:
                h = key()
                first = asyncio.create_task(c.post("/v1/apply", json={"n": 9}, headers=h))
                await asyncio.sleep(0.2)
                await asyncio.to_thread(server.kill)
                if not down_s:
                    await asyncio.to_thread(server.start)
                counter.gate.set()
                done = await asyncio.wait_for(first, 30)
                assert done.status_code == 200, done.text
                if down_s:
                    await asyncio.sleep(down_s)
                    await asyncio.to_thread(server.start)
                again = await c.post("/v1/apply", json={"n": 9}, headers=h)
                assert again.status_code == 200, again.text
                assert again.json() == {"n": 9, "run": 1}
                assert again.headers["idempotent-replayed"] == "true"
                assert counter.runs == 1
        finally:
            await store.aclose()
