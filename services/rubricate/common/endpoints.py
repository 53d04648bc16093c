"""Internal routes as typed values: one `Endpoint` (the client's type, without a gRPC method)
per route a service serves to another, declared once in the serving package's `endpoints`
module. The serving router takes its path from it (`@router.post(X.path, name=X.name)`) and
the caller calls it (`ServiceClient.call(X, body, path={...})`), so the path, its segment
escaping (`Endpoint.url_path`) and the answer's model are written in one place.
"""

from typing import TypeVar

from pydantic import BaseModel

from rubricate_client.endpoints import Endpoint, NoBody

TASKS = "/v1/tasks"
"""Where the model servers' task routes live."""

ReqT = TypeVar("ReqT", bound=BaseModel)
RespT = TypeVar("RespT", bound=BaseModel)


def post(
    name: str, path: str, request: type[ReqT], response: type[RespT], *query: str
) -> Endpoint[ReqT, RespT]:
    """A POST route; `name` is also the route's name (a model-server task's label)."""
    return Endpoint(name, "POST", path, request, response, None, query)


def get(name: str, path: str, response: type[RespT], *query: str) -> Endpoint[NoBody, RespT]:
    """A GET route and the query parameters it reads."""
    return Endpoint(name, "GET", path, NoBody, response, None, query)


def put(
    name: str, path: str, request: type[ReqT], response: type[RespT], *query: str
) -> Endpoint[ReqT, RespT]:
    """A PUT route."""
    return Endpoint(name, "PUT", path, request, response, None, query)


def delete(name: str, path: str, response: type[RespT], *query: str) -> Endpoint[NoBody, RespT]:
    """A DELETE route (no body)."""
    return Endpoint(name, "DELETE", path, NoBody, response, None, query)
