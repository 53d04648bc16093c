"""The gateway's gRPC server: every endpoint with an `rpc` in the endpoint table, served from
the same route functions (and so the same service objects) as HTTP.

A call decodes the request message into the endpoint's Pydantic model, calls the HTTP route's
function in process (`RouteInvoker`), and encodes its response model. Errors become the gRPC
code of their HTTP status (`rpc.status`), with the HTTP error body in trailing metadata.
Tenant and request id travel as metadata `x-rubricate-tenant` and `x-request-id`.
"""

import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import grpc
from fastapi import FastAPI
from google.protobuf.message import Message

from rubricate.common.metrics import GRPC_LATENCY
from rubricate.common.tenancy import TENANT_HEADER
from rubricate.gateway.endpoints import ENDPOINTS, PROTO_PACKAGE, Endpoint
from rubricate.gateway.invoke import RouteInvoker
from rubricate.rpc.convert import message_to_model, model_to_message
from rubricate.rpc.protos import endpoint_types
from rubricate.rpc.status import (
    ERROR_METADATA,
    RETRY_AFTER_METADATA,
    STATUS_METADATA,
    describe_error,
    grpc_code,
)

log = logging.getLogger("rubricate.grpc")

Handler = Callable[[Message, grpc.aio.ServicerContext[Any, Any]], Awaitable[Message]]


def _handler(invoker: RouteInvoker, endpoint: Endpoint[Any, Any]) -> Handler:
    _, response_cls = endpoint_types(endpoint)
    invoker.route(endpoint.method, endpoint.path)  # fail at start-up, not at the first call

    async def handle(request: Message, context: grpc.aio.ServicerContext[Any, Any]) -> Message:
        started = time.perf_counter()
        metadata = {k.lower(): v for k, v in (context.invocation_metadata() or ())}
        request_id = str(metadata.get("x-request-id") or uuid.uuid4().hex)[:128]
        headers = {"x-request-id": request_id}
        tenant = metadata.get(TENANT_HEADER.lower())
        if isinstance(tenant, str):
            headers[TENANT_HEADER] = tenant
        code = grpc.StatusCode.OK
        try:
            body = message_to_model(request, endpoint.request) if endpoint.has_body else None
            path_params = {p: str(getattr(request, p)) for p in endpoint.path_params}
            result = await invoker.call(
                endpoint.method,
                endpoint.path,
                body=body,
                path_params=path_params,
                headers=headers,
                request_id=request_id,
            )
            if not isinstance(result, endpoint.response):
                result = endpoint.response.model_validate(result)
            return model_to_message(result, response_cls)
        except Exception as exc:
            status, error, extra = describe_error(exc, request_id=request_id)
            code = grpc_code(status)
            trailing = [
                (ERROR_METADATA, error.model_dump_json()),
                (STATUS_METADATA, str(status)),
            ]
            retry_after = {k.lower(): v for k, v in extra.items()}.get("retry-after")
            if retry_after is not None:
                trailing.append((RETRY_AFTER_METADATA, retry_after))
            if status >= 500:
                log.warning(
                    "grpc.failed method=%s status=%d request_id=%s error=%s",
                    endpoint.grpc_path,
                    status,
                    request_id,
                    error.message,
                )
            context.set_trailing_metadata(tuple(trailing))
            await context.abort(code, error.message)
            raise  # unreachable: abort raises
        finally:
            GRPC_LATENCY.labels(endpoint.grpc_path or "", code.name).observe(
                time.perf_counter() - started
            )

    return handle


def build_handlers(
    app: FastAPI, endpoints: Sequence[Endpoint[Any, Any]] = ENDPOINTS
) -> list[grpc.GenericRpcHandler]:
    invoker = RouteInvoker(app)
    services: dict[str, dict[str, grpc.RpcMethodHandler[Any, Any]]] = {}
    for endpoint in endpoints:
        if endpoint.rpc is None:
            continue
        request_cls, response_cls = endpoint_types(endpoint)
        service, method = endpoint.rpc
        services.setdefault(service, {})[method] = grpc.unary_unary_rpc_method_handler(
            _handler(invoker, endpoint),
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
        self._server: grpc.aio.Server | None = None

    async def start(self) -> int:
        options = [
            ("grpc.max_receive_message_length", self.max_message_bytes),
            ("grpc.max_send_message_length", self.max_message_bytes),
            ("grpc.so_reuseport", 0),
        ]
        server = grpc.aio.server(options=options)
        server.add_generic_rpc_handlers(tuple(build_handlers(self.app)))
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
