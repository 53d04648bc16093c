"""One error shape for every HTTP service (the shape is the client's `schemas.errors`).

{"error": {"type": "...", "message": "...", "field": "rollouts[1].trajectory" | null,
           "details": [{"field": ..., "message": ...}], "request_id": "..."}}
"""

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from rubricate_client.errors import DomainError
from rubricate_client.schemas.common import UsageOut
from rubricate_client.schemas.errors import ErrorBody, ErrorDetail, ErrorResponse

log = logging.getLogger("rubricate.errors")


class ServiceError(Exception):
    """An error a route raises on purpose, with its HTTP status and error type."""

    def __init__(
        self,
        status_code: int,
        message: str,
        *,
        type: str = "error",
        field: str | None = None,
        headers: dict[str, str] | None = None,
        usage: UsageOut | None = None,
    ) -> None:
        super().__init__(message)
        self.usage = usage
        self.status_code = status_code
        self.message = message
        self.type = type
        self.field = field
        self.headers = headers


def field_path(loc: tuple[int | str, ...] | list[int | str]) -> str:
    """('body', 'rollouts', 1, 'trajectory') -> 'rollouts[1].trajectory'."""
    parts = list(loc)
    if parts and parts[0] in ("body", "query", "path", "header"):
        parts = parts[1:]
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def _request_id(request: Request) -> str | None:
    rid = getattr(request.state, "request_id", None)
    return rid if isinstance(rid, str) else None


def error_json(
    request: Request,
    status_code: int,
    *,
    type: str,
    message: str,
    field: str | None = None,
    details: list[ErrorDetail] | None = None,
    headers: dict[str, str] | None = None,
    usage: UsageOut | None = None,
) -> JSONResponse:
    body = ErrorResponse(
        error=ErrorBody(
            type=type,
            message=message,
            field=field,
            details=details or [],
            request_id=_request_id(request),
            usage=usage,
        )
    )
    return JSONResponse(body.model_dump(), status_code=status_code, headers=headers)


def service_error_json(request: Request, exc: ServiceError) -> JSONResponse:
    """A `ServiceError` in the one error shape, with its status and headers."""
    return error_json(
        request,
        exc.status_code,
        type=exc.type,
        message=exc.message,
        field=exc.field,
        headers=exc.headers,
        usage=exc.usage,
    )


ErrorMapping = Mapping[type[Exception], Callable[[Exception], ServiceError]]
"""Exception type → the `ServiceError` it stands for (subclasses included)."""


def install_error_mappings(app: FastAPI, mappings: ErrorMapping) -> None:
    """Map exceptions that routes let through to their `ServiceError`, once for the app,
    instead of wrapping each call site; answered exactly as if the route raised it."""
    for exc_type, to_error in mappings.items():
        app.add_exception_handler(exc_type, _mapped_handler(to_error))


def _mapped_handler(
    to_error: Callable[[Exception], ServiceError],
) -> Callable[[Request, Exception], Awaitable[JSONResponse]]:
    async def handler(request: Request, exc: Exception) -> JSONResponse:
        return service_error_json(request, to_error(exc))

    return handler


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        details: list[ErrorDetail] = []
        for err in exc.errors():
            loc: Any = err.get("loc", ())
            msg = str(err.get("msg", "invalid value"))
            details.append(ErrorDetail(field=field_path(tuple(loc)) or None, message=msg))
        first = details[0] if details else ErrorDetail(message="invalid request")
        message = f"{first.field}: {first.message}" if first.field else first.message
        return error_json(
            request,
            422,
            type="validation_error",
            message=message,
            field=first.field,
            details=details,
        )

    @app.exception_handler(DomainError)
    async def _domain(request: Request, exc: DomainError) -> JSONResponse:
        message = f"{exc.field}: {exc.message}" if exc.field else exc.message
        return error_json(request, 422, type="validation_error", message=message, field=exc.field)

    @app.exception_handler(ServiceError)
    async def _service(request: Request, exc: ServiceError) -> JSONResponse:
        return service_error_json(request, exc)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        kind = {
            404: "not_found",
            405: "method_not_allowed",
            408: "request_timeout",
            413: "payload_too_large",
        }.get(exc.status_code, "http_error")
        return error_json(
            request,
            exc.status_code,
            type=kind,
            message=str(exc.detail),
            headers=dict(exc.headers) if exc.headers else None,
        )

    @app.exception_handler(Exception)
    async def _unhandled(request: Request, exc: Exception) -> JSONResponse:
        # the details (a database error carries its SQL statement and parameters) go to the
        # log under the request id; the caller gets nothing of the internals
        rid = _request_id(request)
        log.error(
            "http.unhandled_error method=%s path=%s request_id=%s error=%s",
            request.method,
            request.url.path,
            rid,
            type(exc).__name__,
            exc_info=exc,
        )
        return error_json(request, 500, type="internal_error", message=internal_message(rid))


def internal_message(request_id: str | None) -> str:
    """The message of every unhandled error: no exception text, only where to look."""
    where = f" (request id {request_id})" if request_id else ""
    return f"internal error; the details are in the service's log{where}"
