"""`GrpcClient` and `AsyncGrpcClient`: the gateway's gRPC API (rubricate.v1), with the same
typed methods, models, errors and retry policy as the HTTP clients."""

import asyncio
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType
from typing import Any, TypeVar

import grpc
from google.protobuf.message import Message
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
from rubricate_client.convert import ProtoMismatch, json_to_message, message_to_model
from rubricate_client.endpoints import Endpoint
from rubricate_client.errors import APIError, InvalidResponse, RubricateError, TransportError
from rubricate_client.grpc_status import (
    ERROR_METADATA,
    GRPC_TO_HTTP,
    RETRY_AFTER_METADATA,
    STATUS_METADATA,
)
from rubricate_client.headers import TENANT_HEADER
from rubricate_client.protos import endpoint_types
from rubricate_client.retry import RetryPolicy, parse_retry_after, run_async, run_sync
from rubricate_client.schemas.errors import ErrorBody

RespT = TypeVar("RespT", bound=BaseModel)

DEFAULT_TARGET = "127.0.0.1:50051"
DEFAULT_TIMEOUT_S = 900.0
MAX_MESSAGE_BYTES = 16 * 1024 * 1024


class _GrpcConfig:
    def __init__(
        self,
        *,
        timeout_s: float,
        retry: RetryPolicy | None,
        tenant: str | None,
        api_key: str | None,
        metadata: Mapping[str, str] | None,
        concurrency: int,
        idempotency_keys: bool,
    ) -> None:
        if timeout_s <= 0:
            raise ValueError("timeout_s must be positive")
        if concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        self.timeout_s = timeout_s
        self.retry = retry or RetryPolicy()
        self.concurrency = concurrency
        self.idempotency_keys = idempotency_keys
        pairs = {k.lower(): v for k, v in (metadata or {}).items()}
        if tenant is not None:
            pairs[TENANT_HEADER.lower()] = tenant
        if api_key is not None:
            pairs["authorization"] = f"Bearer {api_key}"
        self.metadata = tuple(pairs.items())
        self.options = [
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
        ]

    def prepare(
        self, endpoint: Endpoint[Any, Any], body: Body, path: Mapping[str, str] | None
    ) -> tuple[Message, type[Message], type[Message], tuple[tuple[str, str], ...]]:
        request_cls, response_cls = endpoint_types(endpoint)
        model = as_model(endpoint, body)
        data = {**(payload(model) if endpoint.has_body else {}), **dict(path or {})}
        fixed = any(k == "idempotency-key" for k, _ in self.metadata)
        key = idempotency_headers(endpoint, enabled=self.idempotency_keys and not fixed)
        metadata = self.metadata + tuple(key.items())
        try:
            return json_to_message(data, request_cls), request_cls, response_cls, metadata
        except ProtoMismatch as exc:
            raise RubricateError(f"{endpoint.name}: {exc}") from exc


def grpc_error(exc: grpc.RpcError) -> APIError | TransportError:
    """The SDK error for a failed call; errors the gateway raised carry its HTTP error body."""
    code: grpc.StatusCode = exc.code()
    details = str(exc.details() or "")
    trailing = {k: v for k, v in (exc.trailing_metadata() or ())}
    status_text = trailing.get(STATUS_METADATA)
    if status_text is None:
        if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
            return TransportError(
                f"gRPC {code.name}: {details}", timeout=code is grpc.StatusCode.DEADLINE_EXCEEDED
            )
        status = GRPC_TO_HTTP.get(code, 500)
    else:
        status = int(status_text)
    error: ErrorBody | None = None
    raw = trailing.get(ERROR_METADATA)
    if isinstance(raw, str | bytes):
        try:
            error = ErrorBody.model_validate_json(raw)
        except ValidationError:
            error = None
    retry_after = trailing.get(RETRY_AFTER_METADATA)
    return APIError(
        status=status,
        error=error,
        text=details,
        retry_after=parse_retry_after(retry_after if isinstance(retry_after, str) else None),
        transport="grpc",
        grpc_code=code.name,
    )


def _decode(endpoint: Endpoint[Any, RespT], reply: Message) -> RespT:
    try:
        return message_to_model(reply, endpoint.response)
    except ValidationError as exc:
        raise InvalidResponse(f"{endpoint.name}: unexpected response: {exc}") from exc


class GrpcClient(SyncAPI):
    """Synchronous gRPC client on one channel (HTTP/2 multiplexes the calls); thread-safe."""

    def __init__(
        self,
        target: str = DEFAULT_TARGET,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        retry: RetryPolicy | None = None,
        tenant: str | None = None,
        api_key: str | None = None,
        metadata: Mapping[str, str] | None = None,
        concurrency: int = 8,
        idempotency_keys: bool = True,
    ) -> None:
        self.config = _GrpcConfig(
            timeout_s=timeout_s,
            retry=retry,
            tenant=tenant,
            api_key=api_key,
            metadata=metadata,
            concurrency=concurrency,
            idempotency_keys=idempotency_keys,
        )
        self._channel = grpc.insecure_channel(target, options=self.config.options)

    def call(
        self,
        endpoint: Endpoint[Any, RespT],
        body: Body = None,
        *,
        path: Mapping[str, str] | None = None,
    ) -> RespT:
        message, request_cls, response_cls, metadata = self.config.prepare(endpoint, body, path)
        stub = self._channel.unary_unary(
            endpoint.grpc_path or "",
            request_serializer=request_cls.SerializeToString,
            response_deserializer=response_cls.FromString,
        )

        def attempt() -> RespT:
            try:
                reply = stub(message, timeout=self.config.timeout_s, metadata=metadata)
            except grpc.RpcError as exc:
                raise grpc_error(exc) from exc
            return _decode(endpoint, reply)

        return run_sync(self.config.retry, attempt)

    def call_many(self, endpoint: Endpoint[Any, RespT], bodies: Sequence[Body]) -> list[RespT]:
        if not bodies:
            return []
        with ThreadPoolExecutor(max_workers=min(self.config.concurrency, len(bodies))) as pool:
            return list(pool.map(lambda body: self.call(endpoint, body), bodies))

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class AsyncGrpcClient(AsyncAPI):
    """grpc.aio client; create and use it inside one event loop."""

    def __init__(
        self,
        target: str = DEFAULT_TARGET,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        retry: RetryPolicy | None = None,
        tenant: str | None = None,
        api_key: str | None = None,
        metadata: Mapping[str, str] | None = None,
        concurrency: int = 8,
        idempotency_keys: bool = True,
    ) -> None:
        self.config = _GrpcConfig(
            timeout_s=timeout_s,
            retry=retry,
            tenant=tenant,
            api_key=api_key,
            metadata=metadata,
            concurrency=concurrency,
            idempotency_keys=idempotency_keys,
        )
        self._channel = grpc.aio.insecure_channel(target, options=self.config.options)

    async def call(
        self,
        endpoint: Endpoint[Any, RespT],
        body: Body = None,
        *,
        path: Mapping[str, str] | None = None,
    ) -> RespT:
        message, request_cls, response_cls, metadata = self.config.prepare(endpoint, body, path)
        stub = self._channel.unary_unary(
            endpoint.grpc_path or "",
            request_serializer=request_cls.SerializeToString,
            response_deserializer=response_cls.FromString,
        )

        async def attempt() -> RespT:
            try:
                reply = await stub(message, timeout=self.config.timeout_s, metadata=metadata)
            except grpc.RpcError as exc:
                raise grpc_error(exc) from exc
            return _decode(endpoint, reply)

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
        await self._channel.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
