"""Every service's first look at a request: its body is read within a deadline, and text the
database cannot store is refused before any route sees it.

- A body that does not arrive in full within `body_timeout_s` of the request's start is a 408
  (`request_timeout`) and the connection is closed: a client that sends headers and half a
  body, then stalls, does not hold a worker and a connection forever.
- A NUL character (U+0000) or a lone UTF-16 surrogate (U+D800..U+DFFF) anywhere in the JSON
  body (keys or values, at any depth), the path or the query string is a 422
  (`invalid_text`) naming the field (`rollouts[1].trajectory`): PostgreSQL's text cannot hold
  NUL and UTF-8 cannot encode a lone surrogate, so letting either through would end in a
  database error far from the request.

JSON can only carry these characters as `\\u0000` / `\\udXXX` escapes (a raw control character
makes the JSON invalid), so the body is parsed here only when such an escape occurs in it.
"""

import asyncio
import json
import re
import time
from collections.abc import Iterator
from typing import Any, Final
from urllib.parse import parse_qsl

from fastapi import Request
from starlette.routing import compile_path
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from rubricate.common.errors import error_json
from rubricate_client.schemas.errors import ErrorDetail

DEFAULT_BODY_TIMEOUT_S: Final = 60.0
_SUSPECT: Final = re.compile(rb"\\u(?:0000|[dD][89a-fA-F])")
_BAD_TEXT: Final = re.compile("[\x00\ud800-\udfff]")


def bad_text(value: str) -> str | None:
    """Why `value` cannot be stored, or None when it can."""
    found = _BAD_TEXT.search(value)
    if found is None:
        return None
    if found.group() == "\x00":
        return "contains a NUL character (U+0000), which cannot be stored"
    return f"contains a lone surrogate (U+{ord(found.group()):04X}), which is not valid text"


def find_bad_text(value: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """(field path, reason) of every string in a parsed JSON value that cannot be stored."""
    if isinstance(value, str):
        reason = bad_text(value)
        if reason is not None:
            yield path, reason
    elif isinstance(value, dict):
        for key, item in value.items():
            name = str(key)
            child = f"{path}.{_shown(name)}" if path else _shown(name)
            reason = bad_text(name)
            if reason is not None:
                yield child, f"the key {reason}"
                continue
            yield from find_bad_text(item, child)
    elif isinstance(value, list):
        for n, item in enumerate(value):
            yield from find_bad_text(item, f"{path}[{n}]")


class RequestGuardMiddleware:
    """Reads the whole body first (with the deadline), checks its text, then replays it."""

    def __init__(self, app: ASGIApp, *, body_timeout_s: float = DEFAULT_BODY_TIMEOUT_S) -> None:
        if body_timeout_s <= 0:
            raise ValueError("body_timeout_s must be positive")
        self.app = app
        self.body_timeout_s = body_timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        found = self._bad_path_or_query(scope)
        if found is not None:
            await _refuse(scope, receive, send, [found])
            return

        deadline = time.monotonic() + self.body_timeout_s
        parts: list[bytes] = []
        final: Message | None = None
        while True:
            try:  # asyncio.timeout, not wait_for: on 3.11 wait_for can drop a cancellation
                async with asyncio.timeout(deadline - time.monotonic()):
                    message = await receive()
            except TimeoutError:
                await self._timed_out(scope, receive, send)
                return
            if message["type"] != "http.request":  # the client went away
                final = message
                break
            parts.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = b"".join(parts)

        if _SUSPECT.search(body) and _is_json(scope):
            try:
                parsed = json.loads(body)
            except (ValueError, RecursionError):
                parsed = None  # invalid JSON: the route's own validation says so
            problems = list(find_bad_text(parsed))
            if problems:
                await _refuse(scope, receive, send, problems)
                return

        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                if final is not None:
                    return final
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    def _bad_path_or_query(self, scope: Scope) -> tuple[str, str] | None:
        path: str = scope.get("path", "")
        reason = bad_text(path)
        if reason is not None:
            return _path_param(scope, path) or "path", reason
        raw: bytes = scope.get("query_string", b"")
        if b"%00" in raw or b"\x00" in raw or b"%ed" in raw.lower():
            for name, value in parse_qsl(raw.decode("latin-1"), keep_blank_values=True):
                for text in (name, value):
                    reason = bad_text(text)
                    if reason is not None:
                        return _shown(name) or "query", reason
        return None

    async def _timed_out(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        response = error_json(
            request,
            408,
            type="request_timeout",
            message=f"the request body did not arrive within {self.body_timeout_s:g} s",
            headers={"Connection": "close"},
        )
        await response(scope, receive, send)


def _shown(name: str) -> str:
    """A field name as it can be printed: bad characters as their escapes."""
    return _BAD_TEXT.sub(lambda m: f"\\u{ord(m.group()):04x}", name)


def _path_param(scope: Scope, path: str) -> str | None:
    """The name of the path parameter holding the bad text, from the templates of the app's
    OpenAPI document (built once and cached by FastAPI)."""
    app = scope.get("app")
    try:
        templates = list((app.openapi().get("paths") or {}) if app is not None else ())
    except Exception:  # no document: the field is named "path"
        return None
    for template in templates:
        if "{" not in template:
            continue
        regex, _, _ = compile_path(template)
        match = regex.match(path)
        if match is None:
            continue
        for name, value in match.groupdict().items():
            if bad_text(value) is not None:
                return name
    return None


def _is_json(scope: Scope) -> bool:
    """FastAPI parses a body as JSON with a JSON content type or none at all."""
    for key, value in scope.get("headers") or []:
        if key == b"content-type":
            mime: bytes = value.split(b";", 1)[0].strip().lower()
            return mime == b"application/json" or mime.endswith(b"+json")
    return True


async def _refuse(
    scope: Scope, receive: Receive, send: Send, problems: list[tuple[str, str]]
) -> None:
    details = [ErrorDetail(field=field, message=reason) for field, reason in problems[:20]]
    field, reason = problems[0]
    request = Request(scope, receive)
    response = error_json(
        request,
        422,
        type="invalid_text",
        message=f"{field}: {reason}",
        field=field,
        details=details,
    )
    await response(scope, receive, send)
