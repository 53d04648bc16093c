"""The gateway's gRPC API against its HTTP API: both transports of the SDK call the same
running platform (real services, SQLite store, FakeJudgeBackend) and must agree on results
and on errors (HTTP status <-> gRPC code, same error body)."""

import asyncio
from typing import Any

import grpc
import pytest

from rubricate_client import APIError, AsyncClient, AsyncGrpcClient, GrpcClient, RetryPolicy
from rubricate_client.endpoints import STAGEWISE_ADVANTAGES
from rubricate_client.grpc_status import grpc_code
from rubricate_client.schemas.errors import ErrorBody
from tests.support.gateway import Running, trajectory

NO_RETRY = RetryPolicy(max_retries=0)
PERSISTENT = {"title": "Names the unit mismatch", "description": "Pound-force vs newton."}


def group(question: str, *markers: str, **extra: Any) -> dict[str, Any]:
    return {
        "question": question,
        "rollouts": [{"id": f"r{i}", "trajectory": trajectory(m)} for i, m in enumerate(markers)],
        **extra,
    }


def comparable(data: dict[str, Any]) -> dict[str, Any]:
    """A response without the fields that differ between two calls (wall times, ids)."""
    out = dict(data)
    out.pop("timing", None)
    out.pop("scoring_id", None)
    out["usage"] = {k: v for k, v in data["usage"].items() if k != "latency_s"}
    return out


def clients(running: Running) -> tuple[AsyncClient, AsyncGrpcClient]:
    return (
        AsyncClient(running.platform.urls["gateway"], retry=NO_RETRY),
        AsyncGrpcClient(running.platform.urls["gateway-grpc"], retry=NO_RETRY),
    )


async def test_scoring_is_the_same_over_both_transports(running: Running) -> None:
    http, rpc = clients(running)
    async with http, rpc:
        body = group(
            "Why was the orbiter lost?",
            "[[excellent]]",
            "",
            "[[poor]]",
            persistent_rubrics=[PERSISTENT],
            evolve=False,
            step=3,
        )
        over_http = await http.score_stagewise(body)
        over_grpc = await rpc.score_stagewise(body)
        assert comparable(over_grpc.model_dump(mode="json", by_alias=True)) == comparable(
            over_http.model_dump(mode="json", by_alias=True)
        )
        assert over_grpc.rollouts[0].scores == {  # issue 17: no rubric -> null, not 0.0
            "plan": None,
            "research": None,
            "review": None,
            "answer": 1.0,
        }
        assert over_grpc.unscored_stages == ["plan", "research", "review"]

        # evolving groups of two questions: same scores, returns, advantages, rubric counts
        evolved_http = await http.score_stagewise(group("Q one?", "[[excellent]]", "[[poor]]"))
        evolved_grpc = await rpc.score_stagewise(group("Q two?", "[[excellent]]", "[[poor]]"))
        for a, b in zip(evolved_http.rollouts, evolved_grpc.rollouts, strict=True):
            assert (a.scores, a.returns, a.advantages, a.spans) == (
                b.scores,
                b.returns,
                b.advantages,
                b.spans,
            )
        assert {s: len(v) for s, v in evolved_http.rubrics.items()} == {
            s: len(v) for s, v in evolved_grpc.rubrics.items()
        }
        assert evolved_grpc.generation.status == "ok" and evolved_grpc.lambda_[0][3] == 0.8

        # the buffer each one wrote reads the same over both transports
        for qid in (evolved_http.question_id, evolved_grpc.question_id):
            assert await rpc.get_buffer(qid) == await http.get_buffer(qid)


async def test_advantages_and_rewards_are_the_same_over_both_transports(
    running: Running,
) -> None:
    http, rpc = clients(running)
    async with http, rpc:
        body = {"scores": [[1, 0.5, 0, 1], [0, 0, 1, 0], [0.5, 0.5, 0.5, 0.5]], "mode": "terminal"}
        assert await rpc.stagewise_advantages(body) == await http.stagewise_advantages(body)
        reward = {
            "query": ["P:" + trajectory("[[excellent]]"), "P:" + trajectory("[[poor]]")],
            "prompts": ["P:", "P:"],
            "labels": ['{"question": "Why?", "question_id": "why-1"}', None],
        }
        over_grpc = await rpc.get_reward(reward)
        over_http = await http.get_reward(reward)
        assert over_grpc == over_http
        assert over_grpc.rewards == [1.0, 0.0]


async def test_errors_map_to_grpc_codes_with_the_same_error_body(running: Running) -> None:
    http, rpc = clients(running)
    cases: list[tuple[str, Any]] = [
        (
            "score_stagewise",
            group("Q?", "a", "b") | {"rollouts": [{"id": "x", "trajectory": "t"}] * 2},
        ),
        (
            "score_stagewise",
            group(
                "Q?", "[[fail-all]]", "[[fail-all]]", evolve=False, persistent_rubrics=[PERSISTENT]
            ),
        ),
        ("stagewise_advantages", {"scores": [[1, 2, 3, 4]]}),
        ("get_buffer", "never-scored-question"),
        ("get_reward", {"query": ["a", "b"], "prompts": ["a"]}),
        ("get_reward", {"query": ["a"], "kind": "nugget"}),
    ]
    expected = [
        (422, grpc.StatusCode.INVALID_ARGUMENT),
        (502, grpc.StatusCode.UNAVAILABLE),
        (422, grpc.StatusCode.INVALID_ARGUMENT),
        (404, grpc.StatusCode.NOT_FOUND),
        (422, grpc.StatusCode.INVALID_ARGUMENT),
        (422, grpc.StatusCode.INVALID_ARGUMENT),
    ]
    async with http, rpc:
        for (method, arg), (status, code) in zip(cases, expected, strict=True):
            errors: list[APIError] = []
            for client in (http, rpc):
                with pytest.raises(APIError) as caught:
                    await getattr(client, method)(arg)
                errors.append(caught.value)
            over_http, over_grpc = errors
            assert over_http.status == over_grpc.status == status, (method, over_http)
            assert over_grpc.grpc_code == code.name and grpc_code(status) is code
            assert over_grpc.transport == "grpc" and over_http.transport == "http"
            assert over_http.error is not None and over_grpc.error is not None
            assert _without_id(over_grpc.error) == _without_id(over_http.error), method
            assert over_grpc.request_id


def _without_id(error: ErrorBody) -> dict[str, Any]:
    data = error.model_dump()
    data.pop("request_id")
    if data.get("usage"):
        data["usage"].pop("latency_s")
    return data


async def test_tenant_and_request_id_travel_as_metadata(running: Running) -> None:
    grpc_url = running.platform.urls["gateway-grpc"]
    async with (
        AsyncGrpcClient(grpc_url, tenant="team-a", retry=NO_RETRY) as team_a,
        AsyncClient(running.platform.urls["gateway"], tenant="team-b", retry=NO_RETRY) as team_b,
        AsyncGrpcClient(grpc_url, tenant="bad tenant!", retry=NO_RETRY) as bad,
    ):
        out = await team_a.score_stagewise(group("Tenant Q?", "[[excellent]]", "[[poor]]"))
        assert (await team_a.get_buffer(out.question_id)).question_id == out.question_id
        with pytest.raises(APIError) as other_tenant:
            await team_b.get_buffer(out.question_id)
        assert other_tenant.value.status == 404
        with pytest.raises(APIError) as invalid:
            await bad.get_buffer(out.question_id)
        assert invalid.value.status == 422 and invalid.value.field == "X-Rubricate-Tenant"
    async with AsyncGrpcClient(grpc_url, metadata={"x-request-id": "trace-42"}) as traced:
        with pytest.raises(APIError) as caught:
            await traced.get_buffer("unknown-question")
        assert caught.value.request_id == "trace-42"


async def test_sync_grpc_client_and_bounded_batches(running: Running) -> None:
    grpc_url = running.platform.urls["gateway-grpc"]
    bodies = [{"scores": [[i / 4, 0, 0, 1], [0, 0, 0, 0]]} for i in range(5)]
    async with AsyncGrpcClient(grpc_url, concurrency=2) as client:
        expected = [r.returns for r in await client.call_many(STAGEWISE_ADVANTAGES, bodies)]

    def sync_batch() -> list[Any]:
        with GrpcClient(grpc_url, concurrency=2) as client:
            return [r.returns for r in client.call_many(STAGEWISE_ADVANTAGES, bodies)]

    assert await asyncio.to_thread(sync_batch) == expected
    assert expected[4][0][0] == pytest.approx(1.0 + 0.8)


async def test_grpc_can_be_switched_off(tmp_path: Any) -> None:
    from rubricate.embedded import SERVICES, EmbeddedPlatform
    from rubricate.gateway.settings import GatewaySettings
    from rubricate.testing.fake_judge import FakeJudgeBackend

    platform = EmbeddedPlatform(
        data_dir=tmp_path,
        ports=dict.fromkeys(SERVICES, 0),
        backend=FakeJudgeBackend(),
        gateway=GatewaySettings(grpc_enabled=False),
    )
    async with platform:
        assert "gateway-grpc" not in platform.urls


async def test_grpc_calls_are_authenticated_like_http(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rubricate.common.auth import hash_key, new_key
    from rubricate.embedded import SERVICES, EmbeddedPlatform
    from rubricate.testing.fake_judge import FakeJudgeBackend

    key = new_key()
    monkeypatch.setenv("RUBRICATE_AUTH_MODE", "api_key")
    monkeypatch.setenv("RUBRICATE_AUTH_API_KEYS", f"team-a:{hash_key(key)}")
    monkeypatch.setenv("RUBRICATE_AUTH_INTERNAL_TOKEN", "internal-token-for-tests-only")
    platform = EmbeddedPlatform(
        data_dir=tmp_path, ports=dict.fromkeys(SERVICES, 0), backend=FakeJudgeBackend()
    )
    body = {"scores": [[1, 0, 0, 1], [0, 0, 0, 0]]}
    async with platform:
        target = platform.urls["gateway-grpc"]
        async with AsyncGrpcClient(target, retry=NO_RETRY) as anonymous:
            with pytest.raises(APIError) as missing:
                await anonymous.stagewise_advantages(body)
        assert (missing.value.status, missing.value.grpc_code) == (401, "UNAUTHENTICATED")
        async with AsyncGrpcClient(target, api_key="rk_wrong", retry=NO_RETRY) as wrong:
            with pytest.raises(APIError) as unknown:
                await wrong.stagewise_advantages(body)
        assert unknown.value.status == 401 and unknown.value.type == "unauthorized"
        async with AsyncGrpcClient(
            target, api_key=key, tenant="team-b", retry=NO_RETRY
        ) as spoofing:
            with pytest.raises(APIError) as forbidden:
                await spoofing.stagewise_advantages(body)
        assert (forbidden.value.status, forbidden.value.grpc_code) == (403, "PERMISSION_DENIED")
        async with (
            AsyncGrpcClient(target, api_key=key, retry=NO_RETRY) as team_a,
            AsyncClient(platform.urls["gateway"], api_key=key, retry=NO_RETRY) as team_a_http,
        ):
            assert await team_a.stagewise_advantages(body) == (
                await team_a_http.stagewise_advantages(body)
            )


async def test_tenant_limit_is_resource_exhausted_and_retried_after_its_delay(
    tmp_path: Any,
) -> None:
    from rubricate.embedded import SERVICES, EmbeddedPlatform
    from rubricate.gateway.settings import GatewaySettings
    from rubricate.testing.fake_judge import FakeJudgeBackend

    platform = EmbeddedPlatform(
        data_dir=tmp_path,
        ports=dict.fromkeys(SERVICES, 0),
        backend=FakeJudgeBackend(delay_s=0.3),
        gateway=GatewaySettings(max_in_flight_per_tenant=1, upstream_retries=0),
    )
    async with platform:
        target = platform.urls["gateway-grpc"]
        first = group("Slow Q?", "[[excellent]]", "[[poor]]")
        second = group("Other Q?", "[[excellent]]", "[[poor]]")
        async with AsyncGrpcClient(target, retry=NO_RETRY) as impatient:
            results = await asyncio.gather(
                impatient.score_stagewise(first),
                impatient.score_stagewise(second),
                return_exceptions=True,
            )
        errors = [r for r in results if isinstance(r, APIError)]
        assert len(errors) == 1
        assert (errors[0].status, errors[0].grpc_code) == (429, "RESOURCE_EXHAUSTED")
        assert errors[0].retry_after == 1.0 and errors[0].retryable
        async with AsyncGrpcClient(target, retry=RetryPolicy(max_retries=5)) as patient:
            both = await asyncio.gather(
                patient.score_stagewise(first), patient.score_stagewise(second)
            )
        assert [r.rollouts[0].scores for r in both] == [both[0].rollouts[0].scores] * 2


async def test_open_mode_refuses_grpc_off_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    from fastapi import FastAPI

    from rubricate.gateway.grpc import start_grpc
    from rubricate.gateway.settings import GatewaySettings

    monkeypatch.delenv("RUBRICATE_AUTH_MODE", raising=False)
    with pytest.raises(SystemExit, match="without authentication"):
        await start_grpc(FastAPI(), GatewaySettings(grpc_host="0.0.0.0", grpc_port=0))


async def test_an_idempotency_key_over_grpc_replays_the_first_scoring(running: Running) -> None:
    body = group("Replayed Q?", "[[excellent]]", "[[poor]]")
    async with AsyncGrpcClient(
        running.platform.urls["gateway-grpc"], metadata={"idempotency-key": "trainer-step-1"}
    ) as client:
        first = await client.score_stagewise(body)
        calls = len(running.backend.calls)
        again = await client.score_stagewise(body)
    assert len(running.backend.calls) == calls  # replayed: no second judging
    assert again.generation.new_rubric_ids == first.generation.new_rubric_ids
