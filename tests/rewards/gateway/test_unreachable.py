"""A model server that cannot be reached (restarting: its port refuses connections) is an
outage, not a judgment (issue 33): the gateway holds its calls for a bounded time
(`UPSTREAM_CONNECT_WAIT_S`), and past it a group that needed that server is answered with a
retryable 503 `upstream_unreachable` (Retry-After), never a 200 with null rewards, which
OpenRLHF would not retry; the retry scores the group again. The null of a sample the judge
could not judge (the model server answered) stays as it is.

The embedded platform runs with the fake judge; a second gateway, in process, reaches the
verifier or the rubric generator through a TCP forwarder on a port of its own, stopped to
play the restart (a real connection refused) and started again."""

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit

import httpx

from rubricate.gateway.app import create_app
from rubricate.gateway.settings import GatewaySettings
from tests.support.gateway import Running, trajectory
from tests.support.servers import free_port

PROMPT = "<|user|>Why was the Mars Climate Orbiter lost?<|assistant|>"


class Forwarder:
    """A TCP port that forwards to `target` while started and refuses connections while
    stopped (a service restarting behind a fixed address)."""

    def __init__(self, target: str) -> None:
        parts = urlsplit(target)
        self.host, self.port_to = parts.hostname or "127.0.0.1", parts.port or 80
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._server: asyncio.Server | None = None
        self._pipes: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        for task in list(self._pipes):
            task.cancel()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(self.host, self.port_to)
        pipes = [
            asyncio.create_task(self._pipe(reader, up_writer)),
            asyncio.create_task(self._pipe(up_reader, writer)),
        ]
        self._pipes.update(pipes)
        for pipe in pipes:
            pipe.add_done_callback(self._pipes.discard)

    @staticmethod
    async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            with contextlib.suppress(Exception):
                writer.close()


@asynccontextmanager
async def gateway(
    running: Running, *, via: str, connect_wait_s: float
) -> AsyncIterator[tuple[httpx.AsyncClient, Forwarder]]:
    """A gateway on the platform's services, `via` ("verifier" or "rubric-generator")
    reached through a forwarder (stopped: start it to bring the service back)."""
    urls = dict(running.platform.urls)
    forwarder = Forwarder(urls[via])
    urls[via] = forwarder.url
    app = create_app(
        GatewaySettings(
            rubric_generator_url=urls["rubric-generator"],
            verifier_url=urls["verifier"],
            store_url=urls["store"],
            upstream_retries=0,
            upstream_connect_wait_s=connect_wait_s,
            grpc_enabled=False,
        )
    )
    transport = httpx.ASGITransport(app=app)
    try:
        async with (
            app.router.lifespan_context(app),
            httpx.AsyncClient(transport=transport, base_url="http://gw", timeout=60) as client,
        ):
            yield client, forwarder
    finally:
        await forwarder.stop()


def sample(mark: str, qid: str, **label: Any) -> dict[str, Any]:
    """One sample per request, as OpenRLHF sends them."""
    full = {"question_id": qid, **label}
    return {
        "query": [PROMPT + trajectory(mark)],
        "prompts": [PROMPT],
        "labels": [json.dumps(full)],
    }


def judge_calls(running: Running) -> int:
    return [k for k, _ in running.backend.calls].count("score_sheet")


async def test_a_verifier_that_comes_back_within_the_hold_is_waited_for(
    running: Running,
) -> None:
    """The verifier refuses connections for about a second (restarting): the group's call
    holds, and the samples get their rewards, as in a run with no restart. Without the hold
    (2 upstream retries, here 0) the group was answered null."""
    async with gateway(running, via="verifier", connect_wait_s=20) as (client, forwarder):
        body = {
            "query": [PROMPT + trajectory(m) for m in ("[[excellent]]", "[[poor]]")],
            "prompts": [PROMPT] * 2,
            "labels": [json.dumps({"question_id": "held"})] * 2,
        }
        pending = asyncio.create_task(client.post("/get_reward", json=body))
        await asyncio.sleep(1.0)
        assert not pending.done()  # held, not answered null
        await forwarder.start()
        response = await pending
    assert response.status_code == 200, response.text
    assert response.json()["rewards"] == [1.0, 0.0]


async def test_a_verifier_unreachable_past_the_hold_is_a_retryable_503_then_the_group(
    running: Running,
) -> None:
    """Past the hold, a group of two samples sent in two requests is answered 503
    `upstream_unreachable` with Retry-After on both (before: 200 with null rewards, which
    OpenRLHF's client does not retry); their retries, once the verifier is back, score the
    same group, whole, and get the rewards."""
    async with gateway(running, via="verifier", connect_wait_s=0.5) as (client, forwarder):
        samples = [
            sample("[[excellent]] a", "outage", group_size=2),
            sample("[[poor]] b", "outage", group_size=2),
        ]
        first = await asyncio.gather(*(client.post("/get_reward", json=s) for s in samples))
        for response in first:
            assert response.status_code == 503, response.text
            assert response.json()["error"]["type"] == "upstream_unreachable"
            assert "verifier" in response.json()["error"]["message"]
            assert response.headers["Retry-After"]
        assert judge_calls(running) == 0
        await forwarder.start()
        again = await asyncio.gather(*(client.post("/get_reward", json=s) for s in samples))
    assert [r.status_code for r in again] == [200, 200], [r.text for r in again]
    assert [r.json()["rewards"] for r in again] == [[1.0], [0.0]]
    assert [r.json()["extra_logs"]["rubricate/group_size"] for r in again] == [[2.0], [2.0]]
    assert [r.json()["extra_logs"]["rubricate/partial_group"] for r in again] == [[0.0], [0.0]]


async def test_a_generator_unreachable_with_no_rubrics_is_a_retryable_503(
    running: Running,
) -> None:
    """No rubrics yet and the rubric generator cannot be reached: 503 `upstream_unreachable`
    on `/v1/stagewise/score` and on `/get_reward` (before: 502 `judge_unavailable` and a 200
    with null rewards, as when the judge fails to propose rubrics); once it is back, the
    same request is scored."""
    async with gateway(running, via="rubric-generator", connect_wait_s=0.3) as (client, fwd):
        group = {
            "question": "Why was the Mars Climate Orbiter lost?",
            "question_id": "no-rubrics-yet",
            "rollouts": [{"id": "a", "trajectory": trajectory("[[excellent]]")}],
        }
        scored = await client.post("/v1/stagewise/score", json=group)
        assert scored.status_code == 503, scored.text
        assert scored.json()["error"]["type"] == "upstream_unreachable"
        assert "rubric-generator" in scored.json()["error"]["message"]
        reward = await client.post("/get_reward", json=sample("[[excellent]]", "no-rubrics-yet"))
        assert reward.status_code == 503, reward.text
        assert reward.headers["Retry-After"]
        await fwd.start()
        back = await client.post("/get_reward", json=sample("[[excellent]]", "no-rubrics-yet"))
    assert back.status_code == 200, back.text
    assert back.json()["rewards"] == [1.0]


async def test_a_judgment_that_failed_stays_a_null_while_the_verifier_answers(
    running: Running,
) -> None:
    """The model server answered (its judge failed: 503 `backend_unavailable` after its own
    retries, or an invalid verdict): that is the platform unable to judge the sample, still a
    flagged null in a 200, not an outage. Through the same gateway as above, with a hold."""
    async with gateway(running, via="verifier", connect_wait_s=5) as (client, forwarder):
        await forwarder.start()
        body = {
            "query": [PROMPT + trajectory(m) for m in ("[[fail-all]]", "[[excellent]]")],
            "prompts": [PROMPT] * 2,
            "labels": [json.dumps({"question_id": "judged"})] * 2,
        }
        response = await client.post("/get_reward", json=body)
    assert response.status_code == 200, response.text
    assert response.json()["rewards"] == [None, 1.0]
    assert response.json()["extra_logs"]["rubricate/scored"] == [0.0, 1.0]
