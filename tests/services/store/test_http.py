"""The store's HTTP API on PostgreSQL + Redis (and the embedded SQLite + memory variant)."""

import json
import socket
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from fastapi import FastAPI

from rubricate.stagewise.store.schemas import PruneResponse
from rubricate.stagewise.store.service import cache_key
from rubricate.store.app import create_app
from rubricate.store.settings import StoreSettings
from rubricate_client.schemas.buffers import BufferView
from rubricate_client.schemas.rubrics import Origin, Stage
from tests.support.rubrics import rubric

TENANT_HEADER = "X-Rubricate-Tenant"


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


async def _client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://store"
        ) as client,
    ):
        yield client


@pytest.fixture
def app(pg_url: str, redis_url: str, redis_client: "redis.Redis[str]") -> FastAPI:
    """The store on the test PostgreSQL database and the (flushed) test Redis."""
    return create_app(StoreSettings(database_url=pg_url, redis_url=redis_url))


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async for c in _client(app):
        yield c


@pytest.fixture
def qid() -> str:
    return f"q-{uuid.uuid4().hex[:12]}"


def _add_body(*titles: str, stage: Stage = "plan", origin: Origin = "active") -> dict[str, Any]:
    return {
        "question": "Why is the sky blue?",
        "rubrics": [rubric(t, stage=stage, origin=origin).model_dump(mode="json") for t in titles],
        "step": 1,
    }


async def test_get_missing_is_404_in_the_shared_shape(
    client: httpx.AsyncClient, tenant: str, qid: str
) -> None:
    response = await client.get(f"/v1/buffers/{qid}", headers={TENANT_HEADER: tenant})
    assert response.status_code == 404
    error = response.json()["error"]
    assert error["type"] == "not_found"
    assert qid in error["message"]
    assert error["request_id"]


async def test_add_get_prune_round_trip(client: httpx.AsyncClient, tenant: str, qid: str) -> None:
    headers = {TENANT_HEADER: tenant}
    added = await client.post(
        f"/v1/buffers/{qid}/rubrics", json=_add_body(*"abcd"), headers=headers
    )
    assert added.status_code == 200, added.text
    view = BufferView.model_validate(added.json())
    assert view.version == 1
    assert set(added.json()["rubrics"]) == {"plan", "research", "review", "answer"}
    plan = [r.id for r in view.rubrics["plan"]]
    assert len(plan) == 4

    got = await client.get(f"/v1/buffers/{qid}", headers=headers)
    assert BufferView.model_validate(got.json()) == view

    variances = dict(zip(plan, (0.2, 0.0, 0.1, 0.3), strict=True)) | {"r_gone": 0.5}
    pruned = await client.post(
        f"/v1/buffers/{qid}/prune", json={"variances": variances, "step": 2}, headers=headers
    )
    assert pruned.status_code == 200, pruned.text
    out = PruneResponse.model_validate(pruned.json())
    assert out.pruned == [plan[1]]
    assert out.ignored == ["r_gone"]
    assert [r.id for r in out.buffer.rubrics["plan"]] == [plan[0], plan[2], plan[3]]
    again = await client.get(f"/v1/buffers/{qid}", headers=headers)
    assert BufferView.model_validate(again.json()) == out.buffer


async def test_default_tenant(client: httpx.AsyncClient, qid: str) -> None:
    await client.post(f"/v1/buffers/{qid}/rubrics", json=_add_body("a"))
    response = await client.get(f"/v1/buffers/{qid}", headers={TENANT_HEADER: "default"})
    assert response.status_code == 200
    other = await client.get(f"/v1/buffers/{qid}", headers={TENANT_HEADER: "someone-else"})
    assert other.status_code == 404


async def test_prune_missing_is_404(client: httpx.AsyncClient, tenant: str, qid: str) -> None:
    response = await client.post(
        f"/v1/buffers/{qid}/prune", json={"variances": {}}, headers={TENANT_HEADER: tenant}
    )
    assert response.status_code == 404
    assert response.json()["error"]["type"] == "not_found"


@pytest.mark.parametrize(
    ("method", "path", "body", "headers", "field"),
    [
        ("GET", "/v1/buffers/{qid}", None, {TENANT_HEADER: "bad tenant!"}, TENANT_HEADER),
        ("GET", "/v1/buffers/{qid}", None, {TENANT_HEADER: "x" * 65}, TENANT_HEADER),
        ("GET", "/v1/buffers/" + "q" * 129, None, {}, "question_id"),
        ("POST", "/v1/buffers/{qid}/rubrics", {"rubrics": []}, {}, "question"),
        ("POST", "/v1/buffers/{qid}/rubrics", {"question": "q", "extra": 1}, {}, "extra"),
        ("POST", "/v1/buffers/{qid}/prune", {"variances": {"r_a": -0.1}}, {}, "variances.r_a"),
        ("POST", "/v1/buffers/{qid}/prune", {"caps": {"plan": -1}}, {}, "caps.plan"),
        ("POST", "/v1/buffers/{qid}/prune", {"caps": {"plans": 1}}, {}, "caps.plans"),
        ("POST", "/v1/buffers/{qid}/prune", {"step": -1}, {}, "step"),
    ],
)
async def test_bad_input_is_422_naming_the_field(
    client: httpx.AsyncClient,
    qid: str,
    method: str,
    path: str,
    body: dict[str, Any] | None,
    headers: dict[str, str],
    field: str,
) -> None:
    response = await client.request(method, path.format(qid=qid), json=body, headers=headers)
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["type"] == "validation_error"
    assert error["field"] == field
    assert field in error["message"]


async def test_non_finite_variance_is_422(client: httpx.AsyncClient, qid: str) -> None:
    response = await client.post(
        f"/v1/buffers/{qid}/prune",
        content='{"variances": {"r_a": NaN}}',
        headers={"content-type": "application/json"},
    )
    assert response.status_code == 422
    assert response.json()["error"]["field"] == "variances.r_a"


async def test_bad_rubric_is_422_naming_it(client: httpx.AsyncClient, qid: str) -> None:
    body = _add_body("a", "b")
    body["rubrics"][1]["stage"] = "planning"
    response = await client.post(f"/v1/buffers/{qid}/rubrics", json=body)
    assert response.status_code == 422
    assert response.json()["error"]["field"] == "rubrics[1].stage"
    body = _add_body("a")
    body["rubrics"][0]["id"] = "r" * 200
    response = await client.post(f"/v1/buffers/{qid}/rubrics", json=body)
    assert response.status_code == 422
    assert response.json()["error"]["field"] == "rubrics[0]"


async def test_cache_is_refreshed_by_every_write(
    client: httpx.AsyncClient, redis_client: "redis.Redis[str]", tenant: str, qid: str
) -> None:
    headers = {TENANT_HEADER: tenant}
    key = cache_key(tenant, qid)
    await client.post(f"/v1/buffers/{qid}/rubrics", json=_add_body("a"), headers=headers)
    first = await client.get(f"/v1/buffers/{qid}", headers=headers)  # cached now
    assert json.loads(redis_client.hget(key, "d") or "{}")["version"] == 1

    await client.post(f"/v1/buffers/{qid}/rubrics", json=_add_body("b"), headers=headers)
    second = await client.get(f"/v1/buffers/{qid}", headers=headers)
    titles = [r["title"] for r in second.json()["rubrics"]["plan"]]
    assert titles == ["a", "b"]
    assert second.json()["version"] == first.json()["version"] + 1 == 2
    assert redis_client.hget(key, "v") == "2"

    ids = [r["id"] for r in second.json()["rubrics"]["plan"]]
    await client.post(
        f"/v1/buffers/{qid}/prune",
        json={"variances": {ids[0]: 0.1, ids[1]: 0.2}, "caps": {"plan": 1}},
        headers=headers,
    )
    third = await client.get(f"/v1/buffers/{qid}", headers=headers)
    assert [r["title"] for r in third.json()["rubrics"]["plan"]] == ["b"]


async def test_reads_are_served_from_redis(
    client: httpx.AsyncClient, redis_client: "redis.Redis[str]", tenant: str, qid: str
) -> None:
    headers = {TENANT_HEADER: tenant}
    await client.post(f"/v1/buffers/{qid}/rubrics", json=_add_body("a"), headers=headers)
    key = cache_key(tenant, qid)
    entry = json.loads(redis_client.hget(key, "d") or "{}")
    entry["question"] = "served from the cache"
    redis_client.hset(key, "d", json.dumps(entry))
    response = await client.get(f"/v1/buffers/{qid}", headers=headers)
    assert response.json()["question"] == "served from the cache"

    redis_client.hset(key, "d", "not json")  # a corrupt entry is dropped, not served
    response = await client.get(f"/v1/buffers/{qid}", headers=headers)
    assert response.json()["question"] == "Why is the sky blue?"


async def test_an_older_buffer_never_replaces_a_newer_one_in_the_cache(
    app: FastAPI, client: httpx.AsyncClient, tenant: str, qid: str
) -> None:
    """A reader that loaded the buffer before a write cannot publish it after the write."""
    headers = {TENANT_HEADER: tenant}
    await client.post(f"/v1/buffers/{qid}/rubrics", json=_add_body("a"), headers=headers)
    await client.post(f"/v1/buffers/{qid}/rubrics", json=_add_body("b"), headers=headers)
    stale = BufferView(question_id=qid, question="stale", version=1)
    stored = await app.state.cache.set(
        cache_key(tenant, qid), stale.model_dump_json(), ttl_s=60, version=1
    )
    assert stored is False
    response = await client.get(f"/v1/buffers/{qid}", headers=headers)
    assert [r["title"] for r in response.json()["rubrics"]["plan"]] == ["a", "b"]


async def test_reads_and_writes_work_with_redis_down(
    pg_url: str, tenant: str, qid: str, caplog: pytest.LogCaptureFixture
) -> None:
    settings = StoreSettings(
        database_url=pg_url, redis_url=f"redis://127.0.0.1:{closed_port()}/0", auto_migrate=False
    )
    headers = {TENANT_HEADER: tenant}
    async for client in _client(create_app(settings)):
        added = await client.post(
            f"/v1/buffers/{qid}/rubrics", json=_add_body("a"), headers=headers
        )
        assert added.status_code == 200, added.text
        for _ in range(2):
            got = await client.get(f"/v1/buffers/{qid}", headers=headers)
            assert got.status_code == 200
            assert [r["title"] for r in got.json()["rubrics"]["plan"]] == ["a"]
        ready = await client.get("/readyz")
        assert ready.status_code == 200  # the cache is optional by default
        warnings = [r for r in caplog.records if "store.cache_unavailable" in r.getMessage()]
        assert len(warnings) == 1  # once per outage, not once per request
        assert warnings[0].levelname == "WARNING"
        strict = create_app(settings.model_copy(update={"cache_required": True}))
        async for strict_client in _client(strict):
            not_ready = await strict_client.get("/readyz")
            assert not_ready.status_code == 503
            assert not_ready.json()["checks"]["cache"] == "cache unreachable"


async def test_readiness_and_health(client: httpx.AsyncClient) -> None:
    assert (await client.get("/healthz")).json()["service"] == "store"
    ready = await client.get("/readyz")
    assert ready.status_code == 200, ready.text
    assert ready.json()["checks"] == {"database": "ok"}


async def test_embedded_sqlite_and_memory_cache(tmp_path: Path, qid: str) -> None:
    settings = StoreSettings(data_dir=tmp_path / "data")
    assert settings.database_url == f"sqlite:///{tmp_path / 'data' / 'rubricate.db'}"
    async for client in _client(create_app(settings)):  # migrates at start-up
        added = await client.post(f"/v1/buffers/{qid}/rubrics", json=_add_body("a", "b"))
        assert added.status_code == 200, added.text
        await client.get(f"/v1/buffers/{qid}")
        await client.post(f"/v1/buffers/{qid}/rubrics", json=_add_body("c"))
        got = await client.get(f"/v1/buffers/{qid}")
        assert [r["title"] for r in got.json()["rubrics"]["plan"]] == ["a", "b", "c"]
        assert (await client.get("/readyz")).status_code == 200
