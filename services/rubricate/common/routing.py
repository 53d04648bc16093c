"""Route registration shared by the services' routers: a route declared from its `Endpoint`
(method, path, answer model written once, in the serving package's `endpoints` module), the
service object a route depends on (`app.state.<name>`), and the 404 of a lookup that found
nothing."""

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from fastapi import APIRouter, Request
from fastapi.types import DecoratedCallable

from rubricate.common.errors import ServiceError
from rubricate_client.endpoints import Endpoint

T = TypeVar("T")


def route(
    router: APIRouter, endpoint: Endpoint[Any, Any], **kwargs: Any
) -> Callable[[DecoratedCallable], DecoratedCallable]:
    """The decorator of the route serving `endpoint` on `router`: its method, path and
    response model (`kwargs`: the rest, a summary, a status code)."""
    return router.api_route(
        endpoint.path, methods=[endpoint.method], response_model=endpoint.response, **kwargs
    )


def state_service(
    cls: type[T], name: str, *, missing: Callable[[], ServiceError] | None = None
) -> Callable[[Request], Awaitable[T]]:
    """A route dependency: the `cls` object the app keeps as `app.state.<name>`. With
    `missing`, an app without one answers that error (a feature not enabled). Async, as every
    route dependency here that does no blocking work: FastAPI runs a plain `def` dependency
    in its thread pool, a thread hop per request (6 % of the gateway's CPU at 4,096
    one-sample `/get_reward` requests, with the tenant's)."""

    async def get(request: Request) -> T:
        if missing is None:
            service: T = getattr(request.app.state, name)
            return service
        kept: T | None = getattr(request.app.state, name, None)
        if kept is None:
            raise missing()
        return kept

    return get


def found(value: T | None, message: str) -> T:
    """`value`, or a 404 `not_found` with `message`."""
    if value is None:
        raise ServiceError(404, message, type="not_found")
    return value


def answered_as(
    status_code: int, type: str, field: str | None = None
) -> Callable[[Exception], ServiceError]:
    """An `ErrorMapping` entry: the exception answered with `status_code`, `type` and its own
    text as the message (`field`: the request field it is about)."""
    return lambda exc: ServiceError(status_code, str(exc), type=type, field=field)
