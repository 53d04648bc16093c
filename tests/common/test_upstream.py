"""The one upstream client: its retry policy, deadlines, usage accounting, streamed bodies and
the mapping of upstream failures. The upstream is a fake transport (httpx.MockTransport) that
scripts each answer: this tests the client's orchestration, not a service."""

import asyncio
import json
import time
from collections.abc import Callable

import httpx
import pytest
from pydantic import BaseModel

from rubricate.common import upstream
from rubricate.common.request_context import WaitClock
from rubricate.common.schemas import TaskResponse
from rubricate.common.upstream import (
    MAX_BACKOFF_S,
    ServiceClient,
    UpstreamError,
    backoff_s,
    upstream_failure,
)
from rubricate.common.usage import Usage
from rubricate_client.schemas.common import UsageOut


class Echo(TaskResponse):
    value: int


class Body(BaseModel):
    x: int


def error(
    status: int, *, usage: dict[str, float] | None = None, field: str | None = None
) -> httpx.Response:
    body = {
        "error": {"type": f"t{status}", "message": f"m{status}", "field": field, "usage": usage}
    }
    return httpx.Response(status, json=body)


def ok(value: int = 1, calls: int = 1) -> httpx.Response:
    usage = {"calls": calls, "prompt_tokens": 10, "completion_tokens": 2, "latency_s": 0.5}
    return httpx.Response(
        200, json={"value": value, "usage": usage, "model": "m", "backend": "fake"}
    )


class FakeUpstream:
    """Answers each request with the next scripted response (or raises the scripted error)."""

    def __init__(self, *answers: httpx.Response | Exception) -> None:
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def client(fake: Callable[[httpx.Request], httpx.Response], **kw: object) -> ServiceClient:
    return ServiceClient(
        service="judge",
        base_url="http://judge",
        timeout_s=30.0,
        retries=kw.pop("retries", 2),  # type: ignore[arg-type]
        transport=httpx.MockTransport(fake),
        **kw,  # type: ignore[arg-type]
    )


@pytest.fixture(autouse=True)
def _no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(upstream, "backoff_s", lambda attempt: 0.0)


async def test_503_and_transport_errors_are_retried_then_the_answer_is_read() -> None:
    fake = FakeUpstream(error(503), httpx.ConnectError("refused"), ok(7))
    clock = WaitClock()
    out = await client(fake).request("POST", "/t", json={}, response_model=Echo, clock=clock)
    assert out.value == 7 and len(fake.requests) == 3
    assert clock.total() >= 0


async def test_retries_are_bounded_and_the_last_error_is_raised() -> None:
    fake = FakeUpstream(error(503), error(503), error(503))
    with pytest.raises(UpstreamError) as caught:
        await client(fake).request("GET", "/t", response_model=Echo)
    assert caught.value.status == 503 and caught.value.type == "t503"
    assert len(fake.requests) == 3  # the first try and 2 retries


async def test_a_4xx_is_not_retried_and_carries_type_field_and_usage() -> None:
    fake = FakeUpstream(error(422, field="rollouts[0]", usage={"calls": 1, "prompt_tokens": 5}))
    with pytest.raises(UpstreamError) as caught:
        await client(fake).request("POST", "/t", json={}, response_model=Echo)
    exc = caught.value
    assert (exc.status, exc.type, exc.field) == (422, "t422", "rollouts[0]")
    assert exc.usage == UsageOut(calls=1, prompt_tokens=5)
    assert len(fake.requests) == 1


async def test_retry_false_sends_once() -> None:
    fake = FakeUpstream(httpx.ConnectError("refused"))
    with pytest.raises(UpstreamError) as caught:
        await client(fake).request("POST", "/jobs", json={}, response_model=Echo, retry=False)
    assert caught.value.status is None and caught.value.type == "upstream_unreachable"
    assert len(fake.requests) == 1


async def test_statuses_outside_retry_statuses_are_handed_on() -> None:
    fake = FakeUpstream(error(503))
    with pytest.raises(UpstreamError):
        await client(fake, retry_statuses=frozenset()).request("GET", "/t", response_model=Echo)
    assert len(fake.requests) == 1


async def test_task_adds_usage_of_failed_attempts_and_of_the_answer() -> None:
    fake = FakeUpstream(error(503, usage={"calls": 1, "completion_tokens": 3}), ok(calls=1))
    usage = Usage()
    out = await client(fake).task("/v1/tasks/x", Body(x=1), response_model=Echo, usage=usage)
    assert out.value == 1
    assert (usage.calls, usage.completion_tokens, usage.prompt_tokens) == (2, 5, 10)
    assert json.loads(fake.requests[0].content) == {"x": 1}


async def test_a_failed_task_still_accounts_its_usage() -> None:
    fake = FakeUpstream(error(500, usage={"calls": 1, "prompt_tokens": 40}))
    usage = Usage()
    with pytest.raises(UpstreamError):
        await client(fake).task("/t", Body(x=1), response_model=Echo, usage=usage)
    assert (usage.calls, usage.prompt_tokens) == (1, 40)


async def test_an_invalid_answer_is_an_upstream_error() -> None:
    fake = FakeUpstream(httpx.Response(200, json={"unexpected": True}))
    with pytest.raises(UpstreamError) as caught:
        await client(fake).request("GET", "/t", response_model=Echo)
    assert caught.value.type == "upstream_invalid_response"


async def test_a_passed_deadline_sends_nothing() -> None:
    fake = FakeUpstream(ok())
    with pytest.raises(UpstreamError) as caught:
        await client(fake).request("GET", "/t", response_model=Echo, deadline=time.monotonic() - 1)
    assert caught.value.type == "deadline_exceeded" and fake.requests == []


async def test_the_deadline_bounds_the_attempt_timeout() -> None:
    fake = FakeUpstream(ok())
    await client(fake).request("GET", "/t", response_model=Echo, deadline=time.monotonic() + 2)
    timeout = fake.requests[0].extensions["timeout"]
    assert 0 < timeout["read"] <= 2.0


async def test_no_retry_is_started_past_the_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(upstream, "backoff_s", lambda attempt: 60.0)
    fake = FakeUpstream(error(503), ok())
    with pytest.raises(UpstreamError):
        await client(fake).request("GET", "/t", response_model=Echo, deadline=time.monotonic() + 5)
    assert len(fake.requests) == 1


async def test_a_stream_is_refused_before_its_first_chunk() -> None:
    fake = FakeUpstream(error(404), httpx.Response(200, content=b'{"a":1}\n{"b":2}\n'))
    c = client(fake)
    with pytest.raises(UpstreamError) as caught:
        await c.stream("GET", "/export")
    assert caught.value.status == 404
    chunks = [chunk async for chunk in await c.stream("GET", "/export")]
    assert b"".join(chunks) == b'{"a":1}\n{"b":2}\n'


async def test_a_shared_semaphore_caps_calls_across_clients() -> None:
    in_flight = 0
    peak = 0

    async def slow(request: httpx.Request) -> httpx.Response:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.01)
        in_flight -= 1
        return ok()

    cap = asyncio.Semaphore(2)
    clients = [
        ServiceClient(
            service=name,
            base_url="http://x",
            timeout_s=5,
            retries=0,
            concurrency=cap,
            transport=httpx.MockTransport(slow),
        )
        for name in ("generator", "verifier")
    ]
    await asyncio.gather(
        *(clients[i % 2].request("GET", "/t", response_model=Echo) for i in range(8))
    )
    assert peak == 2


def test_backoff_is_jittered_and_capped() -> None:
    values = {backoff_s(1) for _ in range(50)}
    assert len(values) > 1 and all(0.25 <= v <= 0.5 for v in values)
    assert all(backoff_s(20) <= MAX_BACKOFF_S for _ in range(20))


def test_constructor_refuses_nonsense() -> None:
    with pytest.raises(ValueError, match="retries"):
        ServiceClient(service="s", base_url="http://x", timeout_s=1, retries=-1)
    with pytest.raises(ValueError, match="timeout_s"):
        ServiceClient(service="s", base_url="http://x", timeout_s=0, retries=0)


@pytest.mark.parametrize(
    ("status", "expected", "retry_after"),
    [
        (422, 422, None),
        (404, 404, None),
        (None, 503, "5"),
        (503, 503, "5"),
        (500, 502, "5"),
        (429, 502, "5"),
    ],
)
def test_upstream_failures_map_to_the_callers_error(
    status: int | None, expected: int, retry_after: str | None
) -> None:
    exc = UpstreamError(service="miner", status=status, type="x", message="boom", field="corpus")
    mapped = upstream_failure(exc)
    assert mapped.status_code == expected
    assert (mapped.headers or {}).get("Retry-After") == retry_after
    if expected < 500:
        assert mapped.field == "corpus" and mapped.message == "boom"
    else:
        assert mapped.message.startswith("miner unreachable" if status is None else "miner failed")


async def test_a_post_that_timed_out_is_not_sent_twice() -> None:
    fake = FakeUpstream(httpx.ReadTimeout("slow model"), ok())
    with pytest.raises(UpstreamError) as caught:
        await client(fake).task("/v1/tasks/x", Body(x=1), response_model=Echo, usage=Usage())
    assert caught.value.type == "upstream_timeout" and len(fake.requests) == 1


async def test_a_get_that_timed_out_and_a_connect_timeout_are_retried() -> None:
    fake = FakeUpstream(httpx.ReadTimeout("slow"), ok(3))
    assert (await client(fake).request("GET", "/t", response_model=Echo)).value == 3
    fake = FakeUpstream(httpx.ConnectTimeout("no route"), ok(4))
    out = await client(fake).request("POST", "/t", json={}, response_model=Echo)
    assert out.value == 4 and len(fake.requests) == 2


async def test_a_refused_connection_is_held_beyond_the_retries_until_the_upstream_listens() -> None:
    """Issue 33: a model server restarting refuses connections for longer than the retries
    last; with `connect_wait_s` the call (a POST: nothing was sent) is tried again until it
    connects, instead of failing after `retries`."""
    refused = [httpx.ConnectError("refused") for _ in range(5)]
    fake = FakeUpstream(*refused, ok(3))
    out = await client(fake, retries=0, connect_wait_s=5.0).request(
        "POST", "/t", json={}, response_model=Echo
    )
    assert out.value == 3 and len(fake.requests) == 6


async def test_the_connect_hold_is_bounded_and_covers_only_calls_never_sent() -> None:
    """Past `connect_wait_s` the refusal is raised (`upstream_unreachable`, not connected);
    a call that was sent and lost its connection is retried only `retries` times, and
    `retry=False` is never held."""

    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused")

    started = time.monotonic()
    with pytest.raises(UpstreamError) as caught:
        await client(refuse, retries=0, connect_wait_s=0.3).request(
            "POST", "/t", json={}, response_model=Echo
        )
    assert time.monotonic() - started >= 0.3
    assert caught.value.type == "upstream_unreachable" and caught.value.not_connected
    assert upstream.unreachable(caught.value)

    dropped = FakeUpstream(httpx.ReadError("reset"), ok())
    with pytest.raises(UpstreamError) as caught:
        await client(dropped, retries=0, connect_wait_s=5.0).request(
            "POST", "/t", json={}, response_model=Echo
        )
    assert not caught.value.not_connected and len(dropped.requests) == 1
    assert upstream.unreachable(caught.value)  # no answer: the upstream went away

    once = FakeUpstream(httpx.ConnectError("refused"), ok())
    with pytest.raises(UpstreamError):
        await client(once, retries=2, connect_wait_s=5.0).request(
            "POST", "/t", json={}, response_model=Echo, retry=False
        )
    assert len(once.requests) == 1


def test_only_a_missing_answer_is_unreachable_not_an_answer_or_a_timeout() -> None:
    def err(status: int | None, type_: str) -> UpstreamError:
        return UpstreamError(service="s", status=status, type=type_, message="m")

    assert upstream.unreachable(err(None, "upstream_unreachable"))
    for status, type_ in (
        (503, "backend_unavailable"),  # the model server answered: its judge is down
        (502, "judge_output_invalid"),
        (None, "upstream_timeout"),
        (None, "deadline_exceeded"),
        (None, "upstream_invalid_response"),
    ):
        assert not upstream.unreachable(err(status, type_)), (status, type_)
