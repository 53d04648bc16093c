"""Text the database cannot store is refused naming the field; bodies have a read deadline;
unhandled errors carry no internals (issue 17, item 8)."""

import asyncio
import logging
import socket
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import APIRouter, FastAPI

from rubricate.common.app import create_service_app
from rubricate.common.request_guards import find_bad_text
from rubricate.store.app import create_app as create_store
from rubricate.store.settings import StoreSettings
from tests.support.gateway import Running, trajectory
from tests.support.rubrics import rubric
from tests.support.servers import serve_app

TENANT = {"X-Rubricate-Tenant": "guards"}


def test_find_bad_text_names_every_field() -> None:
    value = {
        "question": "ok",
        "rollouts": [{"trajectory": "fine"}, {"trajectory": "bad\x00"}],
        "meta": {"k\x00": 1, "lone": "x\ud800y"},
    }
    found = dict(find_bad_text(value))
    assert set(found) == {"rollouts[1].trajectory", "meta.k\\u0000", "meta.lone"}
    assert "NUL" in found["rollouts[1].trajectory"]
    assert "surrogate" in found["meta.lone"]
    assert list(find_bad_text({"a": ["b", 1, None, {"c": "é"}]})) == []


@pytest.fixture
async def store_client(pg_url: str) -> AsyncIterator[httpx.AsyncClient]:
    """The real store app on PostgreSQL (which cannot store NUL)."""
    app = create_store(StoreSettings(database_url=pg_url, auto_migrate=False))
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://s") as c,
    ):
        yield c


def add_body(title: str, question: str = "Why is the sky blue?") -> dict[str, Any]:
    return {
        "question": question,
        "rubrics": [rubric(title).model_dump(mode="json")],
        "step": 1,
    }


def assert_refused(response: httpx.Response, field: str) -> None:
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["type"] == "invalid_text"
    assert error["field"] == field
    assert error["message"].startswith(f"{field}: ")
    assert "SQL" not in error["message"] and "INSERT" not in error["message"]


async def test_nul_in_a_json_field_is_a_422_naming_it(store_client: httpx.AsyncClient) -> None:
    qid = f"q-{uuid.uuid4().hex[:8]}"
    r = await store_client.post(
        f"/v1/buffers/{qid}/rubrics", json=add_body("a"[:1], "why\x00?"), headers=TENANT
    )
    assert_refused(r, "question")
    nested = add_body("title")
    nested["rubrics"][0]["title"] = "ti\x00tle"
    r = await store_client.post(f"/v1/buffers/{qid}/rubrics", json=nested, headers=TENANT)
    assert_refused(r, "rubrics[0].title")
    # nothing was written, and a clean body still works
    ok = await store_client.post(f"/v1/buffers/{qid}/rubrics", json=add_body("t"), headers=TENANT)
    assert ok.status_code == 200, ok.text


async def test_lone_surrogates_and_nul_keys_are_refused(store_client: httpx.AsyncClient) -> None:
    qid = f"q-{uuid.uuid4().hex[:8]}"
    raw = b'{"question": "a\\ud83d b", "rubrics": [], "step": 1}'
    r = await store_client.post(
        f"/v1/buffers/{qid}/rubrics",
        content=raw,
        headers={**TENANT, "Content-Type": "application/json"},
    )
    assert_refused(r, "question")
    raw = b'{"question": "q", "rubrics": [], "step": 1, "x\\u0000": 1}'
    r = await store_client.post(f"/v1/buffers/{qid}/rubrics", content=raw, headers=TENANT)
    assert_refused(r, "x\\u0000")
    # an escaped backslash before "u0000" is text, not a NUL: it passes the guard
    raw = b'{"question": "a \\\\u0000 b", "rubrics": [], "step": 1}'
    r = await store_client.post(
        f"/v1/buffers/{qid}/rubrics",
        content=raw,
        headers={**TENANT, "Content-Type": "application/json"},
    )
    assert r.status_code != 422 or r.json()["error"]["type"] != "invalid_text", r.text


async def test_nul_in_path_and_query_params_is_a_422_naming_them(
    store_client: httpx.AsyncClient,
) -> None:
    r = await store_client.get("/v1/scorings/abc%00def", headers=TENANT)
    assert_refused(r, "scoring_id")
    r = await store_client.get("/v1/buffers/q-1?note=a%00b", headers=TENANT)
    assert_refused(r, "note")


async def test_nul_through_the_gateway_names_the_field(running: Running) -> None:
    body = {
        "question": "Why?",
        "rollouts": [
            {"id": "a", "trajectory": trajectory("[[excellent]]")},
            {"id": "b", "trajectory": trajectory("[[poor]]") + "\x00"},
        ],
    }
    r = await running.client.post("/v1/stagewise/score", json=body)
    assert_refused(r, "rollouts[1].trajectory")
    r = await running.client.get("/v1/jobs/job%00x")
    assert_refused(r, "job_id")
    assert running.backend.calls == []  # refused before any model call


def failing_app() -> FastAPI:
    router = APIRouter()

    @router.get("/v1/boom")
    async def boom() -> None:
        raise RuntimeError(
            "(psycopg.errors.DataError) invalid byte sequence [SQL: INSERT INTO rubrics "
            "(tenant, title) VALUES (%(tenant)s, %(title)s)] password=hunter2"
        )

    return create_service_app(service="t", title="t", routers=[router])


async def test_unhandled_errors_carry_no_internals(caplog: pytest.LogCaptureFixture) -> None:
    app = failing_app()
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
        with caplog.at_level(logging.ERROR, logger="rubricate.errors"):
            r = await c.get("/v1/boom", headers={"X-Request-ID": "rid-123"})
    assert r.status_code == 500
    error = r.json()["error"]
    assert error["type"] == "internal_error"
    assert error["request_id"] == "rid-123"
    for leak in ("SQL", "INSERT", "psycopg", "hunter2", "RuntimeError"):
        assert leak not in error["message"], error["message"]
    assert "rid-123" in error["message"]
    logged = [rec for rec in caplog.records if "http.unhandled_error" in rec.getMessage()]
    assert logged and logged[0].exc_info is not None  # the details are in the log


def stalled_request(port: int, *, sent: bytes, total: int) -> tuple[float, bytes, bool]:
    """Send headers announcing `total` body bytes and only `sent` of them, then stall.
    Returns (seconds until the answer, the answer, whether the server closed the socket)."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(
            b"POST /v1/echo HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {total}\r\n\r\n".encode()
            + sent
        )
        started = time.monotonic()
        answer = b""
        closed = False
        while True:
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                break
            if not chunk:
                closed = True
                break
            answer += chunk
        return time.monotonic() - started, answer, closed


async def test_a_stalled_body_gets_408_within_the_timeout() -> None:
    router = APIRouter()

    @router.post("/v1/echo")
    async def echo(body: dict[str, Any]) -> dict[str, Any]:
        return body

    app = create_service_app(service="t", title="t", routers=[router], body_timeout_s=1.0)
    with serve_app(app) as port:
        elapsed, answer, closed = await asyncio.to_thread(
            stalled_request, port, sent=b'{"a": ', total=100
        )
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
    assert b'"type":"request_timeout"' in answer
    assert 0.9 <= elapsed < 10, elapsed
    assert closed  # the connection does not stay open for the rest of the body
