"""`Client` and `AsyncClient`: the gateway's HTTP API, typed with its Pydantic models.

One pooled httpx client per SDK client (keep-alive connections are reused across calls),
retries per `RetryPolicy`, at most `concurrency` calls in flight in `call_many`.
"""

import asyncio
import json
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel, ValidationError
from typing_extensions import Self

from rubricate_client.api import (
    AsyncAPI,
    Body,
    SyncAPI,
    as_model,
    idempotency_headers,
    payload,
)
from rubricate_client.curation_api import AsyncCurationAPI, SyncCurationAPI
from rubricate_client.endpoints import Endpoint
from rubricate_client.errors import APIError, InvalidResponse, TransportError
from rubricate_client.headers import TENANT_HEADER
from rubricate_client.retry import RetryPolicy, parse_retry_after, run_async, run_sync
from rubricate_client.schemas.errors import ErrorResponse
from rubricate_client.wire import json_to_model

RespT = TypeVar("RespT", bound=BaseModel)

DEFAULT_URL = "http://127.0.0.1:8000"
DEFAULT_TIMEOUT_S = 900.0
"""A scoring call waits on an LLM judge: minutes on a CPU model."""


class _HTTPConfig:
    def __init__(
        self,
        base_url: str,
        *,
        timeout_s: float,
        connect_timeout_s: float,
        retry: RetryPolicy | None,
        tenant: str | None,
        api_key: str | None,
        headers: Mapping[str, str] | None,
        max_connections: int,
        concurrency: int,
        idempotency_keys: bool,
    ) -> None:
        if timeout_s <= 0 or connect_timeout_s <= 0:
            raise ValueError("timeouts must be positive")
        if concurrency < 1 or max_connections < 1:
            raise ValueError("concurrency and max_connections must be >= 1")
        self.base_url = base_url.rstrip("/")
        self.retry = retry or RetryPolicy()
        self.concurrency = concurrency
        self.idempotency_keys = idempotency_keys
        self.timeout = httpx.Timeout(timeout_s, connect=connect_timeout_s)
        self.limits = httpx.Limits(
            max_connections=max_connections, max_keepalive_connections=max_connections
        )
        self.headers = {"user-agent": "rubricate-client", **(headers or {})}
        if tenant is not None:
            self.headers[TENANT_HEADER] = tenant
        if api_key is not None:
            self.headers["authorization"] = f"Bearer {api_key}"

    def request_args(
        self, endpoint: Endpoint[Any, Any], body: Body, path: Mapping[str, str] | None
    ) -> tuple[str, str, dict[str, Any] | None, dict[str, str]]:
        model = as_model(endpoint, body)
        url = endpoint.url_path(dict(path or {}))
        fixed = any(k.lower() == "idempotency-key" for k in self.headers)
        headers = idempotency_headers(endpoint, enabled=self.idempotency_keys and not fixed)
        return endpoint.method, url, payload(model) if endpoint.has_body else None, headers


def parse_response(endpoint: Endpoint[Any, RespT], response: httpx.Response) -> RespT:
    if response.status_code >= 400:
        raise api_error(response)
    try:
        return json_to_model(json.loads(response.content), endpoint.response)
    except (ValidationError, ValueError) as exc:
        raise InvalidResponse(f"{endpoint.name}: unexpected response: {exc}") from exc


def api_error(response: httpx.Response) -> APIError:
    try:
        error = ErrorResponse.model_validate_json(response.content).error
    except ValidationError:
        error = None
    return APIError(
        status=response.status_code,
        error=error,
        text=response.text[:2000],
        retry_after=parse_retry_after(response.headers.get("retry-after")),
        transport="http",
    )


def transport_error(exc: httpx.TransportError) -> TransportError:
    return TransportError(
        f"{type(exc).__name__}: {exc}", timeout=isinstance(exc, httpx.TimeoutException)
    )


_RETRIED = (httpx.TimeoutException, httpx.ConnectError, httpx.RemoteProtocolError)
"""Timeouts, refused connections and connections dropped before an answer."""


class Client(SyncAPI, SyncCurationAPI):
    """Synchronous client; thread-safe (one connection pool shared by threads)."""

    def __init__(
        self,
        base_url: str = DEFAULT_URL,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        connect_timeout_s: float = 10.0,
        retry: RetryPolicy | None = None,
        tenant: str | None = None,
        api_key: str | None = None,
        headers: Mapping[str, str] | None = None,
        max_connections: int = 64,
        concurrency: int = 8,
        idempotency_keys: bool = True,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.config = _HTTPConfig(
            base_url,
            timeout_s=timeout_s,
            connect_timeout_s=connect_timeout_s,
            retry=retry,
            tenant=tenant,
            api_key=api_key,
            headers=headers,
            max_connections=max_connections,
            concurrency=concurrency,
            idempotency_keys=idempotency_keys,
        )
        self._http = httpx.Client(
            base_url=self.config.base_url,
            timeout=self.config.timeout,
            limits=self.config.limits,
            headers=self.config.headers,
            transport=transport,
        )

    def call(
        self,
        endpoint: Endpoint[Any, RespT],
        body: Body = None,
        *,
        path: Mapping[str, str] | None = None,
    ) -> RespT:
        method, url, json, headers = self.config.request_args(endpoint, body, path)

        def attempt() -> RespT:
            try:
                response = self._http.request(method, url, json=json, headers=headers)
            except _RETRIED as exc:
                raise transport_error(exc) from exc
            return parse_response(endpoint, response)

        return run_sync(self.config.retry, attempt)

    def call_many(self, endpoint: Endpoint[Any, RespT], bodies: Sequence[Body]) -> list[RespT]:
        if not bodies:
            return []
        with ThreadPoolExecutor(max_workers=min(self.config.concurrency, len(bodies))) as pool:
            return list(pool.map(lambda body: self.call(endpoint, body), bodies))

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class AsyncClient(AsyncAPI, AsyncCurationAPI):
    """Asyncio client; use one per event loop."""

    def __init__(
        self,
        base_url: str = DEFAULT_URL,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        connect_timeout_s: float = 10.0,
        retry: RetryPolicy | None = None,
        tenant: str | None = None,
        api_key: str | None = None,
        headers: Mapping[str, str] | None = None,
        max_connections: int = 64,
        concurrency: int = 8,
        idempotency_keys: bool = True,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.config = _HTTPConfig(
            base_url,
            timeout_s=timeout_s,
            connect_timeout_s=connect_timeout_s,
            retry=retry,
            tenant=tenant,
            api_key=api_key,
            headers=headers,
            max_connections=max_connections,
            concurrency=concurrency,
            idempotency_keys=idempotency_keys,
        )
        self._http = httpx.AsyncClient(
            base_url=self.config.base_url,
            timeout=self.config.timeout,
            limits=self.config.limits,
            headers=self.config.headers,
            transport=transport,
        )

    async def call(
        self,
        endpoint: Endpoint[Any, RespT],
        body: Body = None,
        *,
        path: Mapping[str, str] | None = None,
    ) -> RespT:
        method, url, json, headers = self.config.request_args(endpoint, body, path)

        async def attempt() -> RespT:
            try:
                response = await self._http.request(method, url, json=json, headers=headers)
            except _RETRIED as exc:
                raise transport_error(exc) from exc
            return parse_response(endpoint, response)

        return await run_async(self.config.retry, attempt)

    async def call_many(
        self, endpoint: Endpoint[Any, RespT], bodies: Sequence[Body]
    ) -> list[RespT]:
        gate = asyncio.Semaphore(self.config.concurrency)

        async def one(body: Body) -> RespT:
            async with gate:
                return await self.call(endpoint, body)

        return list(await asyncio.gather(*(one(b) for b in bodies)))

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
