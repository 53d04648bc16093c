"""The gateway's gRPC server: every endpoint with an `rpc` in the endpoint table, served by
the same FastAPI app (same routes, service objects and middleware) as HTTP.

A call decodes its message into the endpoint's JSON body (its path parameters and the set
`optional` fields of its query parameters into the URL) and passes it to the gateway app in
process through the gateway's one dispatcher (`common.dispatch.RouteInvoker.http`), with the
call's metadata as headers: `authorization` / `x-api-key`, `x-rubricate-tenant`,
`x-request-id`, `idempotency-key`. So authentication, tenant limits, idempotent replay,
validation and the error shape are those of HTTP by construction. The answer is encoded into
the response message; an error becomes the gRPC code of its HTTP status
(`rubricate_client.grpc_status`), with the HTTP error body and status in trailing metadata.
"""

import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import grpc
from fastapi import FastAPI
from google.protobuf.message import Message

from rubricate.common.dispatch import DispatchResponse, RouteInvoker
from rubricate.common.metrics import GRPC_LATENCY
from rubricate_client.convert import json_to_message, message_to_json
from rubricate_client.endpoints import ENDPOINTS, PROTO_PACKAGE, Endpoint
from rubricate_client.grpc_status import (
    ERROR_METADATA,
    RETRY_AFTER_METADATA,
    STATUS_METADATA,
    grpc_code,
    internal_error,
)
from rubricate_client.protos import endpoint_types
from rubricate_client.schemas.errors import ErrorBody, ErrorResponse

log = logging.getLogger("rubricate.grpc")

Handler = Callable[[Message, Any], Awaitable[Message]]

FORWARDED_METADATA = frozenset(
    {"authorization", "x-api-key", "x-rubricate-tenant", "x-request-id", "idempotency-key"}
)
"""Call metadata passed to the HTTP stack as headers (everything else is dropped)."""


def _http_error(response: DispatchResponse) -> tuple[int, ErrorBody, str | None]:
    try:
        error = ErrorResponse.model_validate_json(response.body).error
    except ValueError:
        text = response.body.decode("utf-8", "replace")[:500]
        error = ErrorBody(type="http_error", message=text)
    return response.status, error, response.headers.get("retry-after")


def _handler(dispatcher: RouteInvoker, endpoint: Endpoint[Any, Any]) -> Handler:
    _, response_cls = endpoint_types(endpoint)

    async def handle(request: Message, context: Any) -> Message:
        started = time.perf_counter()
        headers = {
            k.lower(): v
            for k, v in (context.invocation_metadata() or ())
            if k.lower() in FORWARDED_METADATA and isinstance(v, str)
        }
        request_id = headers.setdefault("x-request-id", uuid.uuid4().hex)[:128]
        code = grpc.StatusCode.OK
        try:
            try:
                path = {p: str(getattr(request, p)) for p in endpoint.path_params}
                path |= {
                    q: str(getattr(request, q))
                    for q in endpoint.query_params
                    if request.HasField(q)
                }
                body = message_to_json(request, endpoint.request) if endpoint.has_body else None
                response = await dispatcher.http(
                    endpoint.method, endpoint.url_path(path), json_body=body, headers=headers
                )
                if response.status < 400:
                    return json_to_message(response.json(), response_cls)
                status, error, retry_after = _http_error(response)
            except Exception as exc:  # a failure of the gRPC layer itself
                status, error = 500, internal_error(exc, request_id=request_id)
                retry_after = None
                log.warning("grpc.failed method=%s error=%s", endpoint.grpc_path, error.message)
            code = grpc_code(status)
            trailing: list[tuple[str, str | bytes]] = [
                (ERROR_METADATA, error.model_dump_json().encode()),
                (STATUS_METADATA, str(status)),
            ]
            if retry_after is not None:
                trailing.append((RETRY_AFTER_METADATA, retry_after))
            context.set_trailing_metadata(tuple(trailing))
            await context.abort(code, error.message)
            raise AssertionError("unreachable: abort raises")
        finally:
            GRPC_LATENCY.labels(endpoint.grpc_path or "", code.name).observe(
                time.perf_counter() - started
            )

    return handle


def build_handlers(
    dispatcher: RouteInvoker, endpoints: Sequence[Endpoint[Any, Any]] = ENDPOINTS
) -> list[Any]:
    services: dict[str, dict[str, Any]] = {}
    for endpoint in endpoints:
        if endpoint.rpc is None:
            continue
        request_cls, response_cls = endpoint_types(endpoint)
        service, method = endpoint.rpc
        services.setdefault(service, {})[method] = grpc.unary_unary_rpc_method_handler(
            _handler(dispatcher, endpoint),
            request_deserializer=request_cls.FromString,
            response_serializer=response_cls.SerializeToString,
        )
    return [
        grpc.method_handlers_generic_handler(f"{PROTO_PACKAGE}.{name}", methods)
        for name, methods in services.items()
    ]


class GrpcServer:
    """A grpc.aio server for the gateway app; `start()` in the lifespan, `stop()` after."""

    def __init__(self, app: FastAPI, *, host: str, port: int, max_message_bytes: int) -> None:
        self.app = app
        self.host = host
        self.requested_port = port
        self.max_message_bytes = max_message_bytes
        self.port: int | None = None
        self._server: Any = None

    async def start(self) -> int:
        options = [
            ("grpc.max_receive_message_length", self.max_message_bytes),
            ("grpc.max_send_message_length", self.max_message_bytes),
            ("grpc.so_reuseport", 0),
        ]
        server = grpc.aio.server(options=options)
        server.add_generic_rpc_handlers(tuple(build_handlers(RouteInvoker(self.app))))
        address = f"{self.host}:{self.requested_port}"
        port = int(server.add_insecure_port(address))
        if port == 0:
            raise RuntimeError(f"gRPC: cannot bind {address}")
        await server.start()
        self._server, self.port = server, port
        log.info("grpc.started address=%s:%d", self.host, port)
        return port

    async def stop(self, grace_s: float = 2.0) -> None:
        if self._server is not None:
            await self._server.stop(grace_s)
            self._server = None
