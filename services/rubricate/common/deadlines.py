"""Request deadlines: the time a caller will still wait, carried in a contextvar.

A caller may send `X-Rubricate-Deadline` (or the standard `Request-Timeout`): the seconds it
will wait. `DeadlineMiddleware` turns that into a request-scoped deadline
(`current_deadline()`) and answers 504 `deadline_exceeded` in the one error shape when it
passes; every `ServiceClient` call made while serving the request bounds its timeout by the
time left and forwards it, and the model servers' LLM layer stops retrying once it is gone.
Imports only the error shape: model servers read deadlines without the HTTP client.
"""

import asyncio
import contextvars
import logging
import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from rubricate.common.errors import error_json

log = logging.getLogger("rubricate.deadlines")

DEADLINE_HEADER: Final = "X-Rubricate-Deadline"
"""Seconds the caller will still wait for the answer (a positive number): sent by a trainer
to the gateway, and by every `ServiceClient` call with the time left of the request served."""
TIMEOUT_HEADER: Final = "Request-Timeout"
"""Accepted as a synonym of `DEADLINE_HEADER` (seconds)."""
MAX_DEADLINE_S: Final = 24 * 3600.0

_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "rubricate_deadline", default=None
)


def current_deadline() -> float | None:
    """The `time.monotonic()` value by which the request being served must be answered."""
    return _DEADLINE.get()


def time_left() -> float | None:
    """Seconds left before the current request's deadline (<= 0 once passed), or None."""
    deadline = _DEADLINE.get()
    return None if deadline is None else deadline - time.monotonic()


@contextmanager
def deadline_scope(seconds: float | None, *, replace: bool = False) -> Iterator[None]:
    """Run the block under a deadline `seconds` from now (None: no deadline of its own),
    never later than a deadline already in force, unless `replace` (work that outlives the
    request that started it, such as a group scored for several requests, sets its own or
    none: tasks copy the deadline of the request that creates them)."""
    deadline = None if seconds is None else time.monotonic() + seconds
    outer = None if replace else _DEADLINE.get()
    if outer is not None and (deadline is None or outer < deadline):
        deadline = outer
    token = _DEADLINE.set(deadline)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def parse_deadline_header(value: str) -> float:
    """Seconds from a deadline header; ValueError unless a positive finite number."""
    seconds = float(value.strip())
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError("must be a positive number of seconds")
    return min(seconds, MAX_DEADLINE_S)


class DeadlineMiddleware:
    """A request's deadline from `X-Rubricate-Deadline` (or `Request-Timeout`) seconds.

    The deadline is in force while the request is served (`current_deadline()`); if it passes
    before the response starts, the work is cancelled and the answer is 504
    `deadline_exceeded` in the one error shape: a request the caller gave up on is dropped,
    never answered with a made-up score. A malformed header is a 400 naming it. Without the
    header nothing changes. Plain ASGI, like the other middleware on the hot path.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        raw, name = headers.get(DEADLINE_HEADER.lower().encode()), DEADLINE_HEADER
        if raw is None:
            raw, name = headers.get(TIMEOUT_HEADER.lower().encode()), TIMEOUT_HEADER
        if raw is None:
            await self.app(scope, receive, send)
            return
        try:
            seconds = parse_deadline_header(raw.decode("latin-1"))
        except ValueError as exc:
            response = error_json(
                Request(scope, receive),
                400,
                type="invalid_header",
                message=f"{name}: {exc}",
                field=name,
            )
            await response(scope, receive, send)
            return
        started = False

        async def tracked_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        with deadline_scope(seconds):
            try:
                async with asyncio.timeout(seconds):
                    await self.app(scope, receive, tracked_send)
            except TimeoutError:
                if started:
                    raise
                log.warning("request.deadline_exceeded path=%s seconds=%g", scope["path"], seconds)
                response = error_json(
                    Request(scope, receive),
                    504,
                    type="deadline_exceeded",
                    message=f"the request's deadline ({name}: {seconds:g} s) passed before "
                    "it was answered; its work was dropped",
                )
                await response(scope, receive, send)
