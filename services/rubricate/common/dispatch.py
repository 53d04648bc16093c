"""The gateway's one in-process dispatcher: a public endpoint reached without a socket.

`RouteInvoker` serves two callers, at two depths of the same app:
- `http(...)`: the whole app (middleware: authentication, tenant limits, Idempotency-Key
  replay, request ids, body limit; validation; the one error shape), as an HTTP client would
  reach it. The gRPC server uses it, so a gRPC call behaves as its HTTP twin by construction.
- `call(...)`: the route function itself, for `/get_reward`, which is already inside an
  authenticated request: it resolves the route's parameters as FastAPI would (the body
  model, path and header parameters validated with their declared constraints, and
  `Depends(...)` callables, which receive a request whose `app` is the gateway) and returns
  the route's value; its exceptions propagate unchanged.
"""

import asyncio
import inspect
import json
import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import FastAPI
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from pydantic import BaseModel, TypeAdapter, ValidationError
from starlette.requests import Request
from starlette.routing import BaseRoute

from rubricate.common.logging import current_request_id, request_id_context
from rubricate_client.errors import DomainError


class RouteNotFound(LookupError):
    pass


@dataclass(frozen=True)
class DispatchResponse:
    """What the app answered to an in-process request (`RouteInvoker.http`)."""

    status: int
    headers: dict[str, str]
    """Lower-case names."""
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class RouteInvoker:
    def __init__(self, app: FastAPI) -> None:
        self.app = app
        self._routes: dict[tuple[str, str], APIRoute] = {}
        self._adapters: dict[int, TypeAdapter[Any]] = {}

    def route(self, method: str, path: str) -> APIRoute:
        key = (method.upper(), path)
        found = self._routes.get(key)
        if found is None:
            for full_path, route in api_routes(self.app.routes):
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
        scope = _http_scope(method, path, headers or {}) | {
            "app": self.app,
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

    async def http(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        headers: Mapping[str, str] | None = None,
    ) -> DispatchResponse:
        """Send one request through the whole app in process. An exception that escapes the
        app (after its own error handling) is a 500 with the error body it sent, if any."""
        body = b"" if json_body is None else json.dumps(json_body).encode()
        sent_headers = {k.lower(): v for k, v in (headers or {}).items()}
        if json_body is not None:
            sent_headers.setdefault("content-type", "application/json")
        sent_headers["content-length"] = str(len(body))
        scope = _http_scope(method, path, sent_headers) | {
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "client": ("127.0.0.1", 0),
            "server": ("gateway.internal", 80),
            "extensions": {},
        }
        done = asyncio.Event()
        delivered = False
        status = 500
        answer_headers: dict[str, str] = {}
        chunks: list[bytes] = []

        async def receive() -> dict[str, Any]:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            await done.wait()
            return {"type": "http.disconnect"}

        async def send(message: Mapping[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
                for k, v in message.get("headers", ()):
                    answer_headers[k.decode("latin-1").lower()] = v.decode("latin-1")
            elif message["type"] == "http.response.body":
                chunks.append(bytes(message.get("body", b"")))
                if not message.get("more_body", False):
                    done.set()

        try:
            await self.app(scope, receive, send)
        except Exception:  # the app sent its 500 (ServerErrorMiddleware) before re-raising
            if not done.is_set():
                status = 500
        finally:
            done.set()
        return DispatchResponse(status=status, headers=answer_headers, body=b"".join(chunks))

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


def _http_scope(method: str, path: str, headers: Mapping[str, str]) -> dict[str, Any]:
    """The ASGI scope both depths share: an HTTP request; `path` may end in a query string
    (`?question_id=q-1`: the gRPC server's query parameters)."""
    path, _, query = path.partition("?")
    return {
        "type": "http",
        "method": method.upper(),
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "scheme": "http",
        "query_string": query.encode(),
        "headers": [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()],
    }


def api_routes(routes: Iterable[BaseRoute], prefix: str = "") -> Iterator[tuple[str, APIRoute]]:
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
        yield from api_routes(included.routes, prefix + str(getattr(context, "prefix", "") or ""))


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
