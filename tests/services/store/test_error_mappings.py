"""Store failures are answered once for the app (`rubricate.store.app.DATABASE_ERRORS`,
`rubricate.reflections.store.routes.BANK_ERRORS`, `rubricate.stagewise.store.routes.
STAGEWISE_ERRORS`), each with the error body, status and headers its route gave when it
wrapped the call itself."""

import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy.exc import TimeoutError as PoolTimeoutError

from rubricate.reflections.store.repository import BankItemConflictError, BankItemNotFoundError
from rubricate.reflections.store.service import IndexUnavailableError
from rubricate.reflections.store.snapshots import SnapshotExistsError, SnapshotNotFoundError
from rubricate.stagewise.store.scorings import ScoringExistsError
from rubricate.store.app import create_app
from rubricate.store.settings import StoreSettings

RID = "rid-error-mapping"


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


async def _client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app),
            base_url="http://store",
            headers={"X-Request-ID": RID},
        ) as client,
    ):
        yield client


def _body(type: str, message: str, field: str | None = None) -> dict[str, Any]:
    error: dict[str, Any] = {
        "type": type,
        "message": message,
        "field": field,
        "details": [],
        "request_id": RID,
        "usage": None,
    }
    return {"error": error}


@pytest.fixture
async def down_client() -> AsyncIterator[httpx.AsyncClient]:
    """A store whose PostgreSQL refuses every connection (nothing listens on the port)."""
    url = f"postgresql://rubricate@127.0.0.1:{_closed_port()}/rubricate"
    async for client in _client(create_app(StoreSettings(database_url=url, auto_migrate=False))):
        yield client


@pytest.fixture
async def sqlite_app(tmp_path: Path) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    app = create_app(StoreSettings(data_dir=tmp_path / "data"))
    async for client in _client(app):
        yield app, client


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", "/v1/buffers/q-down", None),
        ("GET", "/v1/buffers", None),
        ("GET", "/v1/buffers/q-down/curations", None),
        ("GET", "/v1/scorings/s-down", None),
        ("GET", "/v1/scorings?question_id=q-down", None),
        ("POST", "/v1/bank/snapshots", {"step": 1}),
    ],
)
async def test_database_down_is_503_store_unavailable(
    down_client: httpx.AsyncClient, method: str, path: str, body: dict[str, Any] | None
) -> None:
    response = await down_client.request(method, path, json=body)
    assert response.status_code == 503, response.text
    assert response.headers["retry-after"] == "1"
    assert response.json() == _body(
        "store_unavailable", "store database unavailable: OperationalError"
    )


async def test_pool_timeout_is_503_store_unavailable(
    sqlite_app: tuple[FastAPI, httpx.AsyncClient], monkeypatch: pytest.MonkeyPatch
) -> None:
    app, client = sqlite_app

    async def saturated(*_: object, **__: object) -> None:
        raise PoolTimeoutError("QueuePool limit reached")

    monkeypatch.setattr(app.state.buffers, "get", saturated)
    response = await client.get("/v1/buffers/q-1")
    assert response.status_code == 503, response.text
    assert response.headers["retry-after"] == "1"
    assert response.json() == _body("store_unavailable", "store database unavailable: TimeoutError")


@pytest.mark.parametrize(
    ("error", "status", "body", "retry_after"),
    [
        (
            IndexUnavailableError("qdrant refused"),
            503,
            _body("index_unavailable", "bank vector index unavailable: qdrant refused"),
            "5",
        ),
        (
            SnapshotNotFoundError("no snapshot of step 3"),
            404,
            _body("not_found", "no snapshot of step 3", "step"),
            None,
        ),
        (
            SnapshotExistsError("a snapshot of step 3 exists"),
            409,
            _body("conflict", "a snapshot of step 3 exists", "step"),
            None,
        ),
        (
            ScoringExistsError("s-1"),
            409,
            _body("conflict", "scoring s-1 exists", "scoring_id"),
            None,
        ),
        (
            BankItemNotFoundError("no bank item abc"),
            404,
            _body("not_found", "no bank item abc", "question_hash"),
            None,
        ),
        (
            BankItemConflictError("already retired"),
            409,
            _body("conflict", "already retired", "action"),
            None,
        ),
    ],
)
async def test_bank_errors_keep_their_status_and_body(
    sqlite_app: tuple[FastAPI, httpx.AsyncClient],
    monkeypatch: pytest.MonkeyPatch,
    error: Exception,
    status: int,
    body: dict[str, Any],
    retry_after: str | None,
) -> None:
    app, client = sqlite_app

    async def failing(*_: object, **__: object) -> None:
        raise error

    monkeypatch.setattr(app.state.bank, "stats", failing)
    response = await client.get("/v1/bank/stats")
    assert response.status_code == status, response.text
    assert response.headers.get("retry-after") == retry_after
    assert response.json() == body


async def test_rubric_history_with_the_database_down_is_503_too(
    down_client: httpx.AsyncClient,
) -> None:
    """The history route never wrapped its call (it was a 500 `internal_error`); registered
    once for the app, the mapping covers it as docs/store.md says of the whole store."""
    response = await down_client.get("/v1/buffers/q-down/history")
    assert response.status_code == 503, response.text
    assert response.json() == _body(
        "store_unavailable", "store database unavailable: OperationalError"
    )
