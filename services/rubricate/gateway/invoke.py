"""Call a gateway HTTP route's own function in process, without HTTP.

The gRPC servicer and `/get_reward` use it to reach every endpoint through the same route
function (and so the same service object and upstream-error translation) as HTTP. It resolves
the route's parameters as FastAPI would: the body model, path and header parameters
(validated with their declared constraints) and `Depends(...)` callables, which receive a
request whose `app` is the gateway (so `request.app.state` holds the service objects).
"""

import inspect
import uuid
from collections.abc import Iterable, Iterator, Mapping
from typing import Annotated, Any

from fastapi import FastAPI
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from pydantic import BaseModel, TypeAdapter, ValidationError
from starlette.requests import Request
from starlette.routing import BaseRoute

from rubricate.common.logging import current_request_id, request_id_context
from rubricate.core.errors import DomainError


class RouteNotFound(LookupError):
    pass


class RouteInvoker:
    def __init__(self, app: FastAPI) -> None:
        self.app = app
        self._routes: dict[tuple[str, str], APIRoute] = {}
        self._adapters: dict[int, TypeAdapter[Any]] = {}

    def route(self, method: str, path: str) -> APIRoute:
        key = (method.upper(), path)
        found = self._routes.get(key)
        if found is None:
            for full_path, route in _api_routes(self.app.routes):
                if full_path == path and key[0] in (route.methods or ()):
                    _check_supported(route.dependant, full_path)
                    found = self._routes[key] = route
                    break
            else:
                raise RouteNotFound(f"no gateway route {method.upper()} {path}")
        return found

    async def call(
        self,
        method: str,
        path: str,
        *,
        body: BaseModel | None = None,
        path_params: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
        request_id: str | None = None,
    ) -> Any:
        """The route function's return value; its exceptions propagate unchanged."""
        route = self.route(method, path)
        rid = request_id or current_request_id() or uuid.uuid4().hex
        scope: dict[str, Any] = {
            "type": "http",
            "app": self.app,
            "method": method.upper(),
            "path": path,
            "raw_path": path.encode(),
            "root_path": "",
            "scheme": "http",
            "query_string": b"",
            "headers": [
                (k.lower().encode("latin-1"), v.encode("latin-1"))
                for k, v in (headers or {}).items()
            ],
            "path_params": dict(path_params or {}),
            "client": None,
            "server": None,
            "state": {"request_id": rid},
        }
        request = Request(scope)
        # as the HTTP middleware does: logs and upstream calls carry the request id
        with request_id_context(rid):
            values = await self._solve(route.dependant, request, body)
            result = route.endpoint(**values)
            if inspect.isawaitable(result):
                result = await result
        return result

    async def _solve(
        self, dependant: Dependant, request: Request, body: BaseModel | None
    ) -> dict[str, Any]:
        values: dict[str, Any] = {}
        if dependant.request_param_name:
            values[dependant.request_param_name] = request
        for param in dependant.path_params:
            values[param.name] = self._validate(param, request.path_params.get(param.alias))
        for param in dependant.header_params:
            header = param.alias
            if header == param.name and getattr(param.field_info, "convert_underscores", True):
                header = header.replace("_", "-")
            values[param.name] = self._validate(param, request.headers.get(header))
        for param in dependant.query_params:
            values[param.name] = self._validate(param, None)
        for param in dependant.body_params:
            if body is None and param.field_info.is_required():
                raise DomainError("a request body is required", field=None)
            values[param.name] = body
        for sub in dependant.dependencies:
            if sub.call is None or sub.name is None:
                continue
            sub_values = await self._solve(sub, request, body)
            result = sub.call(**sub_values)
            if inspect.isawaitable(result):
                result = await result
            values[sub.name] = result
        return values

    def _validate(self, param: Any, raw: str | None) -> Any:
        info = param.field_info
        if raw is None:
            if info.is_required():
                raise DomainError("field required", field=param.alias)
            return info.get_default(call_default_factory=True)
        adapter = self._adapters.get(id(param))
        if adapter is None:
            adapter = TypeAdapter(Annotated[(info.annotation, *info.metadata)])  # type: ignore[arg-type]
            self._adapters[id(param)] = adapter
        try:
            return adapter.validate_python(raw)
        except ValidationError as exc:
            first = exc.errors()[0]
            raise DomainError(str(first.get("msg", "invalid value")), field=param.alias) from exc


def _api_routes(routes: Iterable[BaseRoute], prefix: str = "") -> Iterator[tuple[str, APIRoute]]:
    """(full path, route) of every APIRoute, also inside routers that FastAPI includes lazily
    (recent releases keep an included router as one entry holding the original router)."""
    for route in routes:
        if isinstance(route, APIRoute):
            yield prefix + route.path, route
            continue
        included = getattr(route, "original_router", None)
        if included is None:
            continue
        context = getattr(route, "include_context", None)
        if getattr(context, "dependencies", None):
            raise RouteNotFound("routers included with dependencies are not supported in process")
        yield from _api_routes(included.routes, prefix + str(getattr(context, "prefix", "") or ""))


def _check_supported(dependant: Dependant, path: str) -> None:
    """Generator dependencies (`yield`) and cookies are not used by the gateway's routes."""
    if dependant.cookie_params:
        raise RouteNotFound(f"{path}: cookie parameters are not supported in process")
    for sub in dependant.dependencies:
        if sub.call is not None and (
            inspect.isgeneratorfunction(sub.call) or inspect.isasyncgenfunction(sub.call)
        ):
            raise RouteNotFound(f"{path}: generator dependencies are not supported in process")
        _check_supported(sub, path)
