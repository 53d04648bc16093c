"""The gateway's one in-process dispatcher: a public endpoint reached without a socket.

`RouteInvoker.http(...)` sends a request through the whole app (middleware: authentication,
tenant admission, Idempotency-Key replay, request ids, body limit; validation; the one error
shape), as an HTTP client would reach it. The gRPC server and the console use it, so a gRPC
call behaves as its HTTP twin by construction. (`/get_reward` calls the capabilities'
service objects through typed functions, `rewards.gateway.service.RewardCapabilities`.)
"""

import asyncio
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI
from fastapi.routing import APIRoute
from starlette.routing import BaseRoute


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


def _http_scope(method: str, path: str, headers: Mapping[str, str]) -> dict[str, Any]:
    """An HTTP request's ASGI scope; `path` may end in a query string (`?question_id=q-1`:
    the gRPC server's query parameters)."""
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
