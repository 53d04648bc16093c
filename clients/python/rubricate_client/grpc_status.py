"""The one mapping between the HTTP API's statuses and gRPC status codes, and the error
body both transports carry.

A gRPC error carries, besides its code and message, trailing metadata: `rubricate-error-bin`
(the HTTP API's error body, UTF-8 JSON), `rubricate-http-status` (the status the same request
gets over HTTP) and `retry-after` (seconds) when the HTTP response has one.
"""

from typing import Final

import grpc

from rubricate_client.convert import ProtoMismatch
from rubricate_client.schemas.errors import ErrorBody

ERROR_METADATA: Final = "rubricate-error-bin"
STATUS_METADATA: Final = "rubricate-http-status"
RETRY_AFTER_METADATA: Final = "retry-after"

HTTP_TO_GRPC: Final[dict[int, grpc.StatusCode]] = {
    400: grpc.StatusCode.INVALID_ARGUMENT,
    401: grpc.StatusCode.UNAUTHENTICATED,
    403: grpc.StatusCode.PERMISSION_DENIED,
    404: grpc.StatusCode.NOT_FOUND,
    405: grpc.StatusCode.UNIMPLEMENTED,
    409: grpc.StatusCode.ABORTED,
    413: grpc.StatusCode.INVALID_ARGUMENT,
    422: grpc.StatusCode.INVALID_ARGUMENT,
    429: grpc.StatusCode.RESOURCE_EXHAUSTED,
    499: grpc.StatusCode.CANCELLED,
    500: grpc.StatusCode.INTERNAL,
    501: grpc.StatusCode.UNIMPLEMENTED,
    502: grpc.StatusCode.UNAVAILABLE,
    503: grpc.StatusCode.UNAVAILABLE,
    504: grpc.StatusCode.DEADLINE_EXCEEDED,
}
"""HTTP status -> gRPC code; other 4xx are FAILED_PRECONDITION, other 5xx INTERNAL."""

GRPC_TO_HTTP: Final[dict[grpc.StatusCode, int]] = {
    grpc.StatusCode.INVALID_ARGUMENT: 400,
    grpc.StatusCode.UNAUTHENTICATED: 401,
    grpc.StatusCode.PERMISSION_DENIED: 403,
    grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.ABORTED: 409,
    grpc.StatusCode.FAILED_PRECONDITION: 400,
    grpc.StatusCode.OUT_OF_RANGE: 400,
    grpc.StatusCode.ALREADY_EXISTS: 409,
    grpc.StatusCode.RESOURCE_EXHAUSTED: 429,
    grpc.StatusCode.CANCELLED: 499,
    grpc.StatusCode.UNIMPLEMENTED: 501,
    grpc.StatusCode.INTERNAL: 500,
    grpc.StatusCode.UNKNOWN: 500,
    grpc.StatusCode.DATA_LOSS: 500,
    grpc.StatusCode.UNAVAILABLE: 503,
    grpc.StatusCode.DEADLINE_EXCEEDED: 504,
}
"""For errors that carry no `rubricate-http-status` (raised by gRPC itself, e.g. no server)."""


def grpc_code(status: int) -> grpc.StatusCode:
    code = HTTP_TO_GRPC.get(status)
    if code is not None:
        return code
    return grpc.StatusCode.FAILED_PRECONDITION if status < 500 else grpc.StatusCode.INTERNAL


def internal_error(exc: BaseException, *, request_id: str | None) -> ErrorBody:
    """The error body of a failure inside the gRPC layer itself (HTTP status 500)."""
    kind = "proto_mismatch" if isinstance(exc, ProtoMismatch) else "internal_error"
    return ErrorBody(type=kind, message=f"{type(exc).__name__}: {exc}", request_id=request_id)
