"""`Idempotency-Key` on the gateway's POST routes: a retried request gets the first result.

The first request with a key runs; its response (2xx, or a 4xx other than 409/429) is kept
for `ttl_s` under (tenant, path, key) with a fingerprint of the body. A retry with the same
body replays it, so buffer and bank updates are applied once; a retry with another body is a
422 (`idempotency_key_reused`). A retry that arrives while the first is still running waits
for it (the trainer's timeout retry must not start a second scoring) up to `wait_s`, then
gets a 409. A 5xx, 409 or 429 is not kept: the key is released and the next retry runs anew.

Keys live in Redis when the gateway has one (shared by replicas), else in process memory.
"""

import asyncio
import hashlib
import json
import logging
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Final

import redis.asyncio as aioredis
from fastapi import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from rubricate.common.auth import scope_tenant
from rubricate.common.errors import error_json
from rubricate.common.metrics import IDEMPOTENT_REPLAYS

log = logging.getLogger("rubricate.gateway.idempotency")

HEADER: Final = b"idempotency-key"
MAX_KEY_CHARS: Final = 255
_PENDING: Final = "pending"
_REPLAY_HEADER: Final = (b"idempotent-replayed", b"true")
_KEPT_HEADERS: Final = frozenset({b"content-type", b"retry-after"})


@dataclass(frozen=True)
class Stored:
    fingerprint: str
    status: int
    headers: list[tuple[str, str]]
    body: bytes

    def dumps(self) -> str:
        return json.dumps(
            {
                "fingerprint": self.fingerprint,
                "status": self.status,
                "headers": self.headers,
                "body": self.body.decode("utf-8", "replace"),
            }
        )

    @classmethod
    def loads(cls, raw: str) -> "Stored":
        data = json.loads(raw)
        return cls(
            fingerprint=data["fingerprint"],
            status=int(data["status"]),
            headers=[(str(k), str(v)) for k, v in data["headers"]],
            body=str(data["body"]).encode(),
        )


class IdempotencyStore(ABC):
    @abstractmethod
    async def claim(self, key: str, fingerprint: str, *, ttl_s: int) -> str | None:
        """Mark `key` in progress. None when claimed; else the existing entry (a pending
        marker `pending:<fingerprint>` or a stored response)."""

    @abstractmethod
    async def get(self, key: str) -> str | None: ...

    @abstractmethod
    async def put(self, key: str, value: Stored, *, ttl_s: int) -> None: ...

    @abstractmethod
    async def release(self, key: str) -> None: ...

    async def aclose(self) -> None:  # noqa: B027 - optional hook
        pass


class MemoryIdempotencyStore(IdempotencyStore):
    """One process only: the embedded mode and a single gateway replica."""

    def __init__(self) -> None:
        self._data: dict[str, tuple[float, str]] = {}

    def _live(self, key: str) -> str | None:
        entry = self._data.get(key)
        if entry is None:
            return None
        if entry[0] < time.monotonic():
            del self._data[key]
            return None
        return entry[1]

    async def claim(self, key: str, fingerprint: str, *, ttl_s: int) -> str | None:
        existing = self._live(key)
        if existing is not None:
            return existing
        self._data[key] = (time.monotonic() + ttl_s, f"{_PENDING}:{fingerprint}")
        return None

    async def get(self, key: str) -> str | None:
        return self._live(key)

    async def put(self, key: str, value: Stored, *, ttl_s: int) -> None:
        self._data[key] = (time.monotonic() + ttl_s, value.dumps())

    async def release(self, key: str) -> None:
        self._data.pop(key, None)


class RedisIdempotencyStore(IdempotencyStore):
    """Shared by every gateway replica; SET NX makes the claim atomic."""

    def __init__(self, url: str, *, prefix: str = "rubricate:idem:") -> None:
        self._redis: aioredis.Redis = aioredis.Redis.from_url(
            url, decode_responses=True, socket_timeout=5, socket_connect_timeout=5
        )
        self._prefix = prefix

    async def claim(self, key: str, fingerprint: str, *, ttl_s: int) -> str | None:
        k = self._prefix + key
        ok = await self._redis.set(k, f"{_PENDING}:{fingerprint}", nx=True, ex=ttl_s)
        if ok:
            return None
        existing = _text(await self._redis.get(k))
        return existing if existing is not None else await self.claim(key, fingerprint, ttl_s=ttl_s)

    async def get(self, key: str) -> str | None:
        return _text(await self._redis.get(self._prefix + key))

    async def put(self, key: str, value: Stored, *, ttl_s: int) -> None:
        await self._redis.set(self._prefix + key, value.dumps(), ex=ttl_s)

    async def release(self, key: str) -> None:
        await self._redis.delete(self._prefix + key)

    async def aclose(self) -> None:
        await self._redis.aclose()


class StoreUnavailableError(Exception):
    pass


class _Guarded:
    """The store's reads and claims, with any failure turned into StoreUnavailableError."""

    def __init__(self, store: IdempotencyStore) -> None:
        self.store = store

    async def claim(self, key: str, fingerprint: str, *, ttl_s: int) -> str | None:
        try:
            return await self.store.claim(key, fingerprint, ttl_s=ttl_s)
        except Exception as exc:
            raise StoreUnavailableError(f"{type(exc).__name__}: {exc}") from exc

    async def get(self, key: str) -> str | None:
        try:
            return await self.store.get(key)
        except Exception as exc:
            raise StoreUnavailableError(f"{type(exc).__name__}: {exc}") from exc


def _text(value: bytes | str | None) -> str | None:
    return value.decode() if isinstance(value, bytes) else value


def _keep(status: int) -> bool:
    return status < 500 and status not in (409, 429)


class IdempotencyMiddleware:
    def __init__(
        self,
        app: ASGIApp,
        *,
        store: IdempotencyStore,
        ttl_s: int = 24 * 3600,
        wait_s: float = 900.0,
        poll_s: float = 0.1,
    ) -> None:
        if ttl_s <= 0 or wait_s < 0:
            raise ValueError("ttl_s must be positive and wait_s non-negative")
        self.app = app
        self.store = store
        self.ttl_s = ttl_s
        self.wait_s = wait_s
        self.poll_s = poll_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        raw_key = headers.get(HEADER)
        if raw_key is None:
            await self.app(scope, receive, send)
            return
        idem = raw_key.decode("latin-1").strip()
        if not idem or len(idem) > MAX_KEY_CHARS:
            await self._error(
                scope,
                receive,
                send,
                422,
                "invalid_idempotency_key",
                f"Idempotency-Key must be 1..{MAX_KEY_CHARS} characters",
            )
            return

        body = await _read_body(receive)
        fingerprint = hashlib.sha256(body).hexdigest()
        tenant = scope_tenant(scope)
        key = hashlib.sha256(f"{tenant}\0{scope['path']}\0{idem}".encode()).hexdigest()

        try:
            await self._dedupe(scope, receive, send, key, fingerprint, body)
        except StoreUnavailableError as exc:
            log.warning("idempotency.unavailable error=%s", exc)
            await self._error(
                scope,
                receive,
                send,
                503,
                "idempotency_unavailable",
                "the Idempotency-Key store is unreachable, so exactly-once cannot be promised; "
                "retry later (or send the request without the header)",
                retry_after=2,
            )

    async def _dedupe(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        key: str,
        fingerprint: str,
        body: bytes,
    ) -> None:
        store = _Guarded(self.store)
        existing = await store.claim(key, fingerprint, ttl_s=self.ttl_s)
        deadline = time.monotonic() + self.wait_s
        while existing is not None:
            if existing.startswith(_PENDING + ":"):
                if existing.split(":", 1)[1] != fingerprint:
                    await self._reused(scope, receive, send)
                    return
                if time.monotonic() >= deadline:
                    await self._error(
                        scope,
                        receive,
                        send,
                        409,
                        "idempotency_in_progress",
                        "a request with this Idempotency-Key is still running; retry later",
                        retry_after=5,
                    )
                    return
                await asyncio.sleep(self.poll_s)
                existing = await store.get(key)
                if existing is None:  # the first attempt failed and released the key
                    existing = await store.claim(key, fingerprint, ttl_s=self.ttl_s)
                continue
            stored = Stored.loads(existing)
            if stored.fingerprint != fingerprint:
                await self._reused(scope, receive, send)
                return
            IDEMPOTENT_REPLAYS.inc()
            await _replay(stored, send)
            return

        await self._run_first(scope, receive, send, key, fingerprint, body)

    async def _run_first(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        key: str,
        fingerprint: str,
        body: bytes,
    ) -> None:
        sent_body = False
        status = 500
        kept: list[tuple[str, str]] = []
        chunks: list[bytes] = []

        async def replay_receive() -> Message:
            nonlocal sent_body
            if not sent_body:
                sent_body = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # after the body: disconnects

        async def capture(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
                kept.extend(
                    (k.decode("latin-1"), v.decode("latin-1"))
                    for k, v in message.get("headers", [])
                    if k.lower() in _KEPT_HEADERS
                )
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))
            await send(message)

        try:
            await self.app(scope, replay_receive, capture)
        except BaseException:
            await self.store.release(key)
            raise
        if _keep(status):
            stored = Stored(
                fingerprint=fingerprint, status=status, headers=kept, body=b"".join(chunks)
            )
            await self.store.put(key, stored, ttl_s=self.ttl_s)
        else:
            await self.store.release(key)

    async def _reused(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._error(
            scope,
            receive,
            send,
            422,
            "idempotency_key_reused",
            "this Idempotency-Key was used with a different request body",
        )

    async def _error(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        status: int,
        type: str,
        message: str,
        retry_after: int | None = None,
    ) -> None:
        headers = {"Retry-After": str(retry_after)} if retry_after else None
        request = Request(scope, receive)
        response = error_json(
            request, status, type=type, message=message, field="Idempotency-Key", headers=headers
        )
        await response(scope, receive, send)


async def _read_body(receive: Receive) -> bytes:
    parts: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        parts.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(parts)


async def _replay(stored: Stored, send: Send) -> None:
    headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in stored.headers]
    headers = [h for h in headers if h[0] != b"content-length"]
    headers.append((b"content-length", str(len(stored.body)).encode()))
    headers.append(_REPLAY_HEADER)
    await send({"type": "http.response.start", "status": stored.status, "headers": headers})
    await send({"type": "http.response.body", "body": stored.body})
