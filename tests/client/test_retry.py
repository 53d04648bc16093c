"""Client retries against a real local HTTP server: 429/503 are retried honouring
Retry-After, timeouts are retried, other 4xx fail at once with the server's error body."""

import time
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from rubricate_client import APIError, AsyncClient, Client, RetryPolicy, TransportError
from rubricate_client.endpoints import STAGEWISE_ADVANTAGES
from rubricate_client.retry import parse_retry_after
from tests.client.scripted_server import Reply, ScriptedServer, error_body

ADVANTAGES_OK = {"returns": [[1.0, 1.0, 1.0, 1.0]], "advantages": [[0.0, 0.0, 0.0, 0.0]]}
BODY = {"scores": [[1, 1, 1, 1]]}
FAST = RetryPolicy(max_retries=3, backoff_base_s=0.01, backoff_max_s=0.05)


def test_retries_429_and_503_honouring_retry_after() -> None:
    script = [
        Reply(429, error_body("rate_limited", "slow down"), {"Retry-After": "1"}),
        Reply(503, error_body("upstream_unavailable", "verifier down"), {"Retry-After": "0"}),
        Reply(200, ADVANTAGES_OK),
    ]
    with ScriptedServer(script).running() as server, Client(server.url, retry=FAST) as client:
        out = client.stagewise_advantages(BODY)
    assert out.returns == [[1.0, 1.0, 1.0, 1.0]]
    assert len(server.received) == 3
    first, second, third = (r.at for r in server.received)
    assert second - first >= 0.95  # waited the 1 s the server asked for, not the 10 ms backoff
    assert third - second < 0.9
    assert all(r.body == BODY and r.path == "/v1/advantages/stagewise" for r in server.received)


def test_fails_fast_on_other_4xx_with_the_server_error_body() -> None:
    script = [
        Reply(422, error_body("validation_error", "scores[0]: 3 values", "scores[0]")),
        Reply(200, ADVANTAGES_OK),
    ]
    with (
        ScriptedServer(script).running() as server,
        Client(server.url, retry=FAST) as client,
        pytest.raises(APIError) as caught,
    ):
        client.stagewise_advantages(BODY)
    assert len(server.received) == 1
    err = caught.value
    assert (err.status, err.type, err.field) == (422, "validation_error", "scores[0]")
    assert err.request_id == "rid-1" and not err.retryable and err.transport == "http"


def test_gives_up_after_max_retries_with_the_last_error() -> None:
    script = [Reply(500, error_body("internal_error", f"boom {i}")) for i in range(5)]
    policy = RetryPolicy(max_retries=2, backoff_base_s=0.01)
    with (
        ScriptedServer(script).running() as server,
        Client(server.url, retry=policy) as client,
        pytest.raises(APIError) as caught,
    ):
        client.stagewise_advantages(BODY)
    assert len(server.received) == 3
    assert caught.value.status == 500 and caught.value.message == "boom 2"


def test_an_error_without_the_json_shape_still_raises_a_typed_error() -> None:
    with (
        ScriptedServer([Reply(404, "nope")]).running() as server,
        Client(server.url) as client,
        pytest.raises(APIError) as caught,
    ):
        client.get_buffer("q1")
    assert caught.value.status == 404 and caught.value.error is None
    assert server.received[0].path == "/v1/buffers/q1"


def test_timeouts_are_retried() -> None:
    script = [Reply(200, ADVANTAGES_OK, delay_s=1.0), Reply(200, ADVANTAGES_OK)]
    with (
        ScriptedServer(script).running() as server,
        Client(server.url, retry=FAST, timeout_s=0.3) as client,
    ):
        assert client.stagewise_advantages(BODY).advantages == [[0.0, 0.0, 0.0, 0.0]]
    assert len(server.received) == 2


def test_refused_connections_end_in_a_transport_error() -> None:
    server = ScriptedServer([])
    url = server.url
    server._server.server_close()  # nothing listens on the port any more
    policy = RetryPolicy(max_retries=1, backoff_base_s=0.01)
    with Client(url, retry=policy, connect_timeout_s=1) as client, pytest.raises(TransportError):
        client.stagewise_advantages(BODY)


async def test_async_client_retries_and_sends_tenant_header() -> None:
    script = [
        Reply(503, error_body("upstream_unavailable", "down"), {"Retry-After": "0"}),
        Reply(200, ADVANTAGES_OK),
    ]
    with ScriptedServer(script).running() as server:
        async with AsyncClient(server.url, retry=FAST, tenant="team-a") as client:
            out = await client.stagewise_advantages(BODY)
    assert out.advantages == [[0.0, 0.0, 0.0, 0.0]]
    assert [r.headers.get("x-rubricate-tenant") for r in server.received] == ["team-a"] * 2


async def test_async_batch_keeps_at_most_concurrency_in_flight() -> None:
    script = [Reply(200, ADVANTAGES_OK, delay_s=0.2) for _ in range(6)]
    with ScriptedServer(script).running() as server:
        async with AsyncClient(server.url, concurrency=2) as client:
            started = time.monotonic()
            out = await client.call_many(STAGEWISE_ADVANTAGES, [BODY] * 6)
            elapsed = time.monotonic() - started
    assert len(out) == 6 and len(server.received) == 6
    starts = sorted(r.at for r in server.received)
    # with 2 in flight, the 3rd and 5th requests start only after earlier ones finished
    assert starts[2] - starts[0] >= 0.18 and starts[4] - starts[2] >= 0.18
    assert elapsed >= 0.55


def test_backoff_is_exponential_with_jitter_and_capped() -> None:
    draws = iter([0.0, 1.0, 0.5, 0.0])
    policy = RetryPolicy(backoff_base_s=1.0, backoff_max_s=3.0, jitter=0.5, rng=lambda: next(draws))
    assert [policy.delay(n) for n in range(4)] == [1.0, 1.0, 3.0 * 0.75, 3.0]
    assert policy.delay(0, retry_after=7.5) == 7.5
    assert RetryPolicy(max_retry_after_s=10).delay(0, retry_after=600) == 10


def test_retry_after_accepts_seconds_and_http_dates() -> None:
    now = datetime(2026, 11, 22, 12, 0, 0, tzinfo=UTC)
    assert parse_retry_after("3") == 3.0
    assert (
        parse_retry_after(format_datetime(now + timedelta(seconds=30), usegmt=True), now=now) == 30
    )
    assert parse_retry_after("soon") is None and parse_retry_after(None) is None


def test_a_post_keeps_one_idempotency_key_across_its_retries() -> None:
    script = [
        Reply(503, error_body("upstream_unavailable", "down"), {"Retry-After": "0"}),
        Reply(200, ADVANTAGES_OK),
        Reply(200, ADVANTAGES_OK),
        Reply(200, {"question_id": "q1"}),
    ]
    with ScriptedServer(script).running() as server, Client(server.url, retry=FAST) as client:
        client.stagewise_advantages(BODY)
        client.stagewise_advantages(BODY)
        client.get_buffer("q1")
    keys = [r.headers.get("idempotency-key") for r in server.received]
    assert keys[0] is not None and keys[0] == keys[1]  # the retry replays, never re-runs
    assert keys[2] is not None and keys[2] != keys[0]  # a new call, a new key
    assert keys[3] is None  # GET needs none
    with (
        ScriptedServer([Reply(200, ADVANTAGES_OK)]).running() as server,
        Client(server.url, idempotency_keys=False) as plain,
    ):
        plain.stagewise_advantages(BODY)
    assert "idempotency-key" not in server.received[0].headers


# --- issue 33: the trainer adapters ride out an outage of the platform


def test_retry_for_s_retries_past_max_retries_while_time_is_left() -> None:
    """A retryable failure is tried again after `max_retries` while `retry_for_s` has not
    passed since the first attempt; without it the call gives up after `max_retries`."""
    down = [Reply(503, error_body("idempotency_unavailable", "redis"), {"Retry-After": "0"})] * 5
    policy = RetryPolicy(max_retries=1, backoff_base_s=0.01, retry_for_s=10.0)
    with (
        ScriptedServer([*down, Reply(200, ADVANTAGES_OK)]).running() as server,
        Client(server.url, retry=policy) as client,
    ):
        assert client.stagewise_advantages(BODY).advantages == [[0.0, 0.0, 0.0, 0.0]]
    assert len(server.received) == 6
    with (
        ScriptedServer([*down, Reply(200, ADVANTAGES_OK)]).running() as server,
        Client(server.url, retry=RetryPolicy(max_retries=1, backoff_base_s=0.01)) as client,
        pytest.raises(APIError),
    ):
        client.stagewise_advantages(BODY)
    assert len(server.received) == 2


def test_retry_for_s_gives_up_when_the_wait_would_end_past_it() -> None:
    script = [Reply(503, error_body("x", "down"), {"Retry-After": "2"})] * 3
    policy = RetryPolicy(max_retries=0, retry_for_s=1.0)
    started = time.monotonic()
    with (
        ScriptedServer(script).running() as server,
        Client(server.url, retry=policy) as client,
        pytest.raises(APIError),
    ):
        client.stagewise_advantages(BODY)
    assert len(server.received) == 1 and time.monotonic() - started < 1.0
    assert not policy.next_delay(0, APIError(status=422, error=None), elapsed_s=0.0)


def test_the_trainer_adapters_policy_outlasts_a_thirty_second_outage() -> None:
    """Issue 33: the gateway answered 503 (Retry-After 2) through a 30 s Redis outage, and
    the SDK's 3 retries ran out after 6 s. The adapters' clients retry for 5 minutes."""
    from rubricate_client.retry import TRAINER_RETRY
    from rubricate_client.trainers import AdapterSettings, sync_client

    assert sync_client(AdapterSettings(url="http://127.0.0.1:9")).config.retry is TRAINER_RETRY
    for exc in (
        APIError(status=503, error=None, retry_after=2.0),
        APIError(status=503, error=None),  # no Retry-After: the backoff, 5 s at most
        TransportError("refused", timeout=False),
    ):
        waited, retry = 0.0, 0
        while (wait := TRAINER_RETRY.next_delay(retry, exc, elapsed_s=waited)) is not None:
            waited, retry = waited + wait, retry + 1
            if waited > 60:
                break
        assert waited > 60, (exc, waited, retry)
