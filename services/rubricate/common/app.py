"""The app factory every service uses: error shape, request ids, body limit, health, metrics."""

import asyncio
import contextlib
import logging
import signal
import threading
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from types import FrameType
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict
from starlette.middleware import Middleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from rubricate.common.auth import AuthMiddleware, AuthSettings
from rubricate.common.errors import (
    ErrorMapping,
    error_json,
    install_error_handlers,
    install_error_mappings,
)
from rubricate.common.logging import ACCESS_LOGGER, MAX_REQUEST_ID_CHARS, REQUEST_ID
from rubricate.common.loop_lag import DEFAULT_INTERVAL_S, with_loop_lag
from rubricate.common.metrics import HTTP_LATENCY
from rubricate.common.request_guards import DEFAULT_BODY_TIMEOUT_S, RequestGuardMiddleware
from rubricate.common.upstream import UpstreamError, upstream_error
from rubricate_client.schemas.errors import ErrorResponse

ReadinessCheck = Callable[[FastAPI], Awaitable[tuple[bool, str]]]
Lifespan = Callable[[FastAPI], AbstractAsyncContextManager[None]]
DrainHook = Callable[[], Awaitable[None]]
DRAIN_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Drain:
    """A service's shutdown, started by SIGTERM (Kubernetes, a rolling upgrade) before the
    HTTP server stops: `/readyz` answers 503 `draining` at once (no new work is routed
    here), the holds run while the server still takes connections (the gateway's: the only
    live replica serves on until it is idle, docs/gateway.md "Failure model"), then the
    server is told to stop (the signal handler installed before, uvicorn's: it stops
    listening and waits for the requests in flight) and the hooks run (the gateway answers
    what it holds and hands the rest over). A second signal during the holds stops the
    server at once."""

    def __init__(self) -> None:
        self.draining = False
        self.holds: list[DrainHook] = []
        """Run in order before the server stops taking connections (after a signal only)."""
        self.hooks: list[DrainHook] = []
        self._task: asyncio.Task[None] | None = None
        self._holding: asyncio.Task[None] | None = None
        self._stop_server: Callable[[], None] | None = None

    def start(self, stop_server: Callable[[], None] | None = None) -> "asyncio.Task[None]":
        """Begin draining (once); the task runs the holds (when `stop_server`, the
        signal's own handling, is given: it is called once they end), then the hooks.
        Called again with `stop_server` while the holds run (a second signal): the server
        stops now."""
        self.draining = True
        if self._task is None:
            self._stop_server = stop_server
            self._task = asyncio.get_running_loop().create_task(self._run(), name="drain")
        elif stop_server is not None:
            if self._holding is not None:
                self._holding.cancel()
            self._release()
            stop_server()
        return self._task

    def _release(self) -> None:
        """Let the server stop (once)."""
        stop, self._stop_server = self._stop_server, None
        if stop is not None:
            stop()

    async def _hold(self) -> None:
        for hold in self.holds:
            try:
                await hold()
            except Exception as exc:  # a failed hold stops the server as it would have
                log.warning("app.drain_hold_failed error=%s: %s", type(exc).__name__, exc)

    async def _run(self) -> None:
        if self._stop_server is not None and self.holds:
            self._holding = asyncio.get_running_loop().create_task(self._hold(), name="hold")
            with contextlib.suppress(asyncio.CancelledError):
                await self._holding
        self._release()
        log.info("app.draining hooks=%d", len(self.hooks))
        for hook in self.hooks:
            try:
                await hook()
            except Exception as exc:  # one hook's failure does not stop the others
                log.warning("app.drain_hook_failed error=%s: %s", type(exc).__name__, exc)

    async def finish(self) -> None:
        """Drain now unless a signal did (shutdown without one), and wait for it."""
        await self.start()


def drain_on_signals(drain: Drain, lifespan: Lifespan | None) -> Lifespan:
    """`lifespan` with `drain` started by SIGTERM or SIGINT (in the main thread; the handler
    that was installed, uvicorn's, still runs, once the drain's holds end) and finished at
    shutdown."""

    @contextlib.asynccontextmanager
    async def wrapped(app: FastAPI) -> AsyncIterator[None]:
        loop = asyncio.get_running_loop()
        previous: dict[int, Any] = {}

        def on_signal(sig: int, frame: FrameType | None) -> None:
            handler = previous.get(sig)

            def stop_server() -> None:  # uvicorn's handling, once the drain's holds end
                if callable(handler):
                    handler(sig, frame)

            try:
                loop.call_soon_threadsafe(drain.start, stop_server)
            except RuntimeError:  # the loop is closed: nothing left to drain
                stop_server()

        if threading.current_thread() is threading.main_thread():
            for handled in DRAIN_SIGNALS:
                previous[int(handled)] = signal.signal(handled, on_signal)
        try:
            if lifespan is None:
                yield
            else:
                async with lifespan(app):
                    yield
        finally:
            for number, handler in previous.items():
                with contextlib.suppress(ValueError, TypeError):
                    if signal.getsignal(number) is on_signal:
                        signal.signal(number, handler)

    return wrapped


_UNMATCHED = "<unmatched>"
_OPS_ROUTES = frozenset({"/healthz", "/readyz", "/metrics"})

access_log = logging.getLogger(ACCESS_LOGGER)
log = logging.getLogger("rubricate.common.app")


class HTTPSettings(BaseSettings):
    """What every service's HTTP layer shares (env prefix RUBRICATE_HTTP_)."""

    model_config = SettingsConfigDict(env_prefix="RUBRICATE_HTTP_", extra="ignore")

    body_timeout_s: float = Field(default=DEFAULT_BODY_TIMEOUT_S, gt=0, le=3600)
    """A request body must arrive in full within this long of the request's start, else
    408 and the connection is closed (a stalled client holds nothing forever)."""
    loop_lag_interval_s: float = Field(default=DEFAULT_INTERVAL_S, ge=0, le=60)
    """How often the service samples its event loop's lag
    (`rubricate_event_loop_lag_seconds`, `common.loop_lag`); 0 turns the sampler off."""


class RequestContextMiddleware:
    """Request ids (X-Request-ID in and out), the body-size limit and the latency histogram.

    Plain ASGI rather than BaseHTTPMiddleware: it sits on the gateway's hot path.
    """

    def __init__(self, app: ASGIApp, *, service: str, max_body_bytes: int) -> None:
        if max_body_bytes <= 0:
            raise ValueError("max_body_bytes must be positive")
        self.app = app
        self.service = service
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        rid_raw = headers.get(b"x-request-id")
        rid = rid_raw.decode("latin-1")[:MAX_REQUEST_ID_CHARS] if rid_raw else uuid.uuid4().hex
        scope.setdefault("state", {})["request_id"] = rid
        rid_token = REQUEST_ID.set(rid)
        try:
            await self._handle(scope, receive, send, headers, rid)
        finally:
            REQUEST_ID.reset(rid_token)

    async def _handle(
        self, scope: Scope, receive: Receive, send: Send, headers: dict[bytes, bytes], rid: str
    ) -> None:
        started = time.perf_counter()
        status_holder = [500]
        limit = self.max_body_bytes

        length = headers.get(b"content-length")
        if length is not None and length.isdigit() and int(length) > limit:
            await self._too_large(scope, receive, send, rid)
            self._observe(scope, 413, started)
            return

        received = 0

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise _BodyTooLarge
            return message

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                status_holder[0] = message["status"]
                message.setdefault("headers", [])
                message["headers"] = [*message["headers"], (b"x-request-id", rid.encode())]
            await send(message)

        try:
            await self.app(scope, limited_receive, send_with_id)
        except _BodyTooLarge:
            await self._too_large(scope, receive, send, rid)
            status_holder[0] = 413
        finally:
            self._observe(scope, status_holder[0], started)

    async def _too_large(self, scope: Scope, receive: Receive, send: Send, rid: str) -> None:
        request = Request(scope, receive)
        response = error_json(
            request,
            413,
            type="payload_too_large",
            message=f"request body exceeds the limit of {self.max_body_bytes} bytes",
        )
        response.headers["x-request-id"] = rid
        await response(scope, receive, send)

    def _observe(self, scope: Scope, status: int, started: float) -> None:
        route = scope.get("route")
        template = getattr(route, "path", None) or _UNMATCHED
        method = scope.get("method", "")
        elapsed = time.perf_counter() - started
        HTTP_LATENCY.labels(self.service, template, method, str(status)).observe(elapsed)
        # one structured access line per request; the probes' only at debug level
        access_log.log(
            logging.DEBUG if template in _OPS_ROUTES and status < 500 else logging.INFO,
            "http.request method=%s route=%s status=%d duration_ms=%.1f",
            method,
            template,
            status,
            elapsed * 1000,
            extra={"service": self.service, "method": method, "route": template, "status": status},
        )


class _BodyTooLarge(Exception):
    pass


ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorResponse}
    for code in (400, 401, 403, 404, 409, 413, 422, 429, 500, 502, 503)
}


def create_service_app(
    *,
    service: str,
    title: str,
    routers: Sequence[APIRouter],
    lifespan: Lifespan | None = None,
    readiness: Sequence[tuple[str, ReadinessCheck]] = (),
    max_body_bytes: int = 8 * 1024 * 1024,
    auth: AuthSettings | None = None,
    middleware: Sequence[Middleware] = (),
    body_timeout_s: float | None = None,
    own_session_prefixes: tuple[str, ...] = (),
    error_mappings: ErrorMapping | None = None,
    drain: Drain | None = None,
) -> FastAPI:
    """`middleware` runs inside authentication (it sees the caller's tenant) and the request
    guard (the body has arrived and its text is storable), outermost first.
    `body_timeout_s`: default RUBRICATE_HTTP_BODY_TIMEOUT_S (60 s).
    `own_session_prefixes`: paths that sign their users in themselves (the console).
    `error_mappings`: exceptions the routes let through, each answered as its `ServiceError`
    (`common.errors.install_error_mappings`); a failed upstream call (`UpstreamError`) is
    mapped on every app, so routes that call another service just await it.
    `drain`: the service's shutdown hooks (`Drain`), started by SIGTERM; `/readyz` answers
    503 `draining` from then on."""
    http = HTTPSettings()
    drain = drain or Drain()
    lifespan = drain_on_signals(drain, lifespan)
    if http.loop_lag_interval_s > 0:
        lifespan = with_loop_lag(service, lifespan, interval_s=http.loop_lag_interval_s)
    app = FastAPI(title=title, lifespan=lifespan, responses=ERROR_RESPONSES)
    app.state.drain = drain
    install_error_handlers(app)
    install_error_mappings(app, {UpstreamError: upstream_error, **(error_mappings or {})})
    # added first = innermost: request ids, limits and latency wrap the authentication
    for item in reversed(middleware):
        app.add_middleware(item.cls, *item.args, **item.kwargs)
    app.add_middleware(
        RequestGuardMiddleware,
        body_timeout_s=body_timeout_s or http.body_timeout_s,
    )
    app.state.auth = auth or AuthSettings()
    app.add_middleware(
        AuthMiddleware,
        settings=app.state.auth,
        service=service,
        own_session_prefixes=own_session_prefixes,
    )
    app.add_middleware(RequestContextMiddleware, service=service, max_body_bytes=max_body_bytes)

    @app.get("/healthz", tags=["ops"])
    async def healthz() -> dict[str, str]:
        return {"status": "ok", "service": service}

    @app.get("/readyz", tags=["ops"])
    async def readyz(request: Request) -> JSONResponse:
        if drain.draining:  # shutting down: route no new work here
            body = {"status": "draining", "service": service, "checks": {}}
            return JSONResponse(body, status_code=503)
        checks: dict[str, str] = {}
        ok = True
        for name, check in readiness:
            try:
                passed, detail = await check(request.app)
            except Exception as exc:  # a readiness probe reports, it never raises
                # unauthenticated: the exception's name only, its text (hosts, SQL) is logged
                log.warning(
                    "readyz.check_failed check=%s error=%s: %s", name, type(exc).__name__, exc
                )
                passed, detail = False, f"{type(exc).__name__}"
            checks[name] = "ok" if passed else detail
            ok = ok and passed
        body = {"status": "ready" if ok else "not_ready", "service": service, "checks": checks}
        return JSONResponse(body, status_code=200 if ok else 503)

    @app.get("/metrics", tags=["ops"])
    async def metrics() -> Response:
        # in a thread: custom collectors (queue depth) do blocking reads at scrape time
        return Response(await asyncio.to_thread(generate_latest), media_type=CONTENT_TYPE_LATEST)

    for router in routers:
        app.include_router(router)
    return app
