"""SIGTERM on a gateway replica while a step is in flight (issue 33, `gateway-term`).

The only live replica (no other replica's liveness in Redis) has nobody to hand its groups
over to: it keeps taking connections, joining and scoring until it is idle, and only then
lets the server stop listening (before: its waiting callers got a 503 at once and the port
closed, so a client that tries 5 times 1 s apart lost its samples before the restart). With
another replica live it hands over at once, as before; and its hold is bounded.

A gateway in process (Redis rendezvous) on the embedded platform's services and fake judge;
a stand-in for uvicorn's signal handler records when the server would stop listening."""

import asyncio
import json
import signal
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

import httpx
import redis

from rubricate.common.rendezvous import RedisRendezvousStore
from rubricate.embedded import SERVICES, EmbeddedPlatform
from rubricate.gateway.app import create_app
from rubricate.gateway.settings import GatewaySettings
from rubricate.testing.fake_judge import FakeJudgeBackend
from tests.support.gateway import fast_llm, trajectory

PROMPT = "<|user|>Why was the Mars Climate Orbiter lost?<|assistant|>"


def body(mark: str, label: dict[str, Any]) -> dict[str, Any]:
    """One sample per request, as OpenRLHF sends them."""
    return {
        "query": [PROMPT + trajectory(mark)],
        "prompts": [PROMPT],
        "labels": [json.dumps(label)],
    }


@asynccontextmanager
async def upstreams(tmp_path: Path) -> AsyncIterator[dict[str, str]]:
    """The embedded platform's services (its own gateway is not used)."""
    embedded = EmbeddedPlatform(
        data_dir=tmp_path,
        ports=dict.fromkeys(SERVICES, 0),
        llm=fast_llm(),
        backend=FakeJudgeBackend(),
        gateway=GatewaySettings(upstream_retries=0, grpc_enabled=False),
    )
    async with embedded:
        yield embedded.urls


class ServerStop:
    """Stands in for uvicorn's SIGTERM handler: when it runs, the server stops listening."""

    def __init__(self) -> None:
        self.at: list[float] = []

    def __call__(self, sig: int, frame: FrameType | None) -> None:
        self.at.append(time.monotonic())

    async def called(self, within_s: float) -> float:
        deadline = time.monotonic() + within_s
        while not self.at:
            assert time.monotonic() < deadline, "the server was never told to stop"
            await asyncio.sleep(0.02)
        return self.at[0]


@contextmanager
def server_stop() -> Iterator[ServerStop]:
    """Installed after the platform started, so that only the gateway under test chains
    to it (the platform's services installed their own handlers before)."""
    stop = ServerStop()
    old = signal.signal(signal.SIGTERM, stop)
    try:
        yield stop
    finally:
        signal.signal(signal.SIGTERM, old)


@asynccontextmanager
async def gateway(urls: dict[str, str], redis_url: str, **settings: Any) -> AsyncIterator[Any]:
    app = create_app(
        GatewaySettings(
            **{
                "rubric_generator_url": urls["rubric-generator"],
                "verifier_url": urls["verifier"],
                "store_url": urls["store"],
                "miner_url": urls["miner"],
                "redis_url": redis_url,
                "upstream_retries": 0,
                "grpc_enabled": False,
                **settings,
            }
        )
    )
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://gw", timeout=60) as client,
    ):
        yield client


async def group_opened(client: "redis.Redis[str]") -> None:
    for _ in range(500):
        if client.keys("rubricate:rv:*:open"):
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the first sample never opened its group")


async def test_the_only_replica_serves_its_groups_before_it_stops_listening(
    tmp_path: Path, redis_url: str, redis_client: "redis.Redis[str]"
) -> None:
    """One sample of a group of two waits when SIGTERM arrives; the other is sent after it.
    The replica, alone, still takes the second request, scores the whole group and answers
    both, and tells the server to stop only once it has been idle for `drain_quiet_s`."""
    label = {"question_id": "mco-drain-alone", "group_size": 2, "step": 0}
    async with upstreams(tmp_path) as urls:
        with server_stop() as stop:
            async with gateway(urls, redis_url, drain_quiet_s=0.5) as client:
                first = asyncio.create_task(client.post("/get_reward", json=body("a", label)))
                await group_opened(redis_client)
                signal.raise_signal(signal.SIGTERM)
                await asyncio.sleep(0.1)
                ready = await client.get("/readyz")
                assert ready.status_code == 503 and ready.json()["status"] == "draining"
                await asyncio.sleep(1.0)  # longer than the quiet: the group still gathers
                assert not stop.at, "stopped listening while its group gathered"
                assert not first.done()
                second = await client.post("/get_reward", json=body("[[excellent]] b", label))
                answered = time.monotonic()
                first_r = await first
                for r in (first_r, second):
                    assert r.status_code == 200, r.text
                    logs = r.json()["extra_logs"]
                    assert logs["rubricate/partial_group"] == [0.0]
                    assert logs["rubricate/group_size"] == [2.0]
                    assert r.json()["rewards"][0] is not None
                stopped = await stop.called(within_s=10)
                assert stopped - answered >= 0.4  # idle for the quiet period first


async def test_with_another_replica_live_it_hands_over_at_once(
    tmp_path: Path, redis_url: str, redis_client: "redis.Redis[str]"
) -> None:
    """A peer's liveness is in Redis: the server stops listening at once and the waiting
    sample gets the retryable 503 (Retry-After 1) whose retry, on the peer, waits on its
    slot."""
    label = {"question_id": "mco-drain-peer", "group_size": 2, "step": 0}
    peer = RedisRendezvousStore(redis_url, retention_s=60)
    await peer.start(lease_s=30)
    try:
        async with upstreams(tmp_path) as urls:
            with server_stop() as stop:
                async with gateway(urls, redis_url, drain_quiet_s=0.5) as client:
                    first = asyncio.create_task(client.post("/get_reward", json=body("a", label)))
                    await group_opened(redis_client)
                    sent = time.monotonic()
                    signal.raise_signal(signal.SIGTERM)
                    assert await stop.called(within_s=5) - sent < 1.0
                    r = await asyncio.wait_for(first, 5)
                    assert r.status_code == 503, r.text
                    assert r.json()["error"]["type"] == "group_assembly_unavailable"
                    assert r.headers["retry-after"] == "1"
    finally:
        await peer.aclose()


async def test_the_hold_of_the_only_replica_is_bounded(
    tmp_path: Path, redis_url: str, redis_client: "redis.Redis[str]"
) -> None:
    """A group that never fills does not keep the replica past `drain_hold_s`: the server
    then stops listening and the waiting sample is answered a retryable 503."""
    label = {"question_id": "mco-drain-bounded", "group_size": 3, "step": 0}
    async with upstreams(tmp_path) as urls:
        with server_stop() as stop:
            async with gateway(urls, redis_url, drain_quiet_s=0.2, drain_hold_s=1.0) as client:
                first = asyncio.create_task(client.post("/get_reward", json=body("a", label)))
                await group_opened(redis_client)
                sent = time.monotonic()
                signal.raise_signal(signal.SIGTERM)
                held = await stop.called(within_s=10) - sent
                assert 0.9 <= held < 5.0, held
                r = await asyncio.wait_for(first, 5)
                assert r.status_code == 503, r.text
                assert r.headers["retry-after"] == "1"


async def test_a_closed_replica_is_not_live_however_many_requests_started_it(
    redis_url: str, redis_client: "redis.Redis[str]"
) -> None:
    """The first requests of a step start the store all at once: one liveness task, which
    closing cancels, so that a stopped replica does not look live to the next one (before,
    each concurrent start began a task of its own and the strays renewed the deleted key:
    the restarted gateway saw its stopped predecessor as a live peer and handed over)."""

    def renewing() -> int:
        return sum(t.get_name() == "rendezvous-liveness" for t in asyncio.all_tasks())

    first = RedisRendezvousStore(redis_url, retention_s=60)
    await asyncio.gather(*(first.start(lease_s=3.0) for _ in range(50)))
    assert renewing() == 1
    second = RedisRendezvousStore(redis_url, retention_s=60)
    await second.start(lease_s=3.0)
    assert await second.peers() == 1
    await first.aclose()
    assert renewing() == 1  # the second's
    await asyncio.sleep(1.2)  # past a renewal period: nothing renews the first's key
    assert await second.peers() == 0
    assert not redis_client.exists(f"rubricate:rv:live:{first.replica}")
    await second.aclose()
