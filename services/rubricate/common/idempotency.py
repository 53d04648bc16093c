"""`Idempotency-Key` on the gateway's POST routes: a retried request gets the first result.

The first request with a key runs; its response (2xx, or a 4xx other than 409/429) is kept
for `ttl_s` under (tenant, path, key) with a fingerprint of the body. A retry with the same
body replays it, so buffer and bank updates are applied once; a retry with another body is a
422 (`idempotency_key_reused`). The fingerprint of a JSON body is taken over its canonical
form (sorted keys, no whitespace), so the same JSON re-serialised is the same body.

While the first request runs its key is *pending*, marked with its owner: the gateway
replica that runs it. A retry that arrives meanwhile waits for the result (a trainer's
timeout retry must not start a second scoring) up to `wait_s`, then gets a 409. Each replica
keeps one liveness entry under a short lease (`lease_s`, 30 s by default), renewed every
`lease_s / 3` while it runs keyed requests: one write per replica per period, however many
requests wait (a sample waiting minutes for its group costs no Redis command of its own).
When the owner dies (a gateway crash) its liveness lapses within `lease_s`, and a waiting or
later retry takes the key over and runs; a pending key nobody settles (a lost Redis write)
expires after `wait_s`. A 5xx, 409 or 429 is not kept: the key is released and the next retry
runs anew.

Keys live in Redis when the gateway has one (shared by replicas), else in process memory.
Every store call is guarded. A store call before the request runs (the claim, a read of a
pending key) is tried again through an outage (0.1 s doubling to 1 s) for `outage_s` (twice
the lease, as the group rendezvous does): a Redis restart or an outage of seconds delays the
request instead of failing it (issue 33: a keyed request refused at once spent the SDK's
retries within a 30 s outage, and its group, one sample short, was scored partial 600 s
later). Only past `outage_s` is it a 503 `idempotency_unavailable` with Retry-After
(exactly-once cannot be promised). A failure after the response was sent (keeping or
releasing the result) is logged and counted in `rubricate_idempotency_store_errors_total` and
never reaches the connection.

A result the store could not keep (Redis away or restarted while the request ran) is never
released instead (its key would run again): it is written twice at once (a restarted Redis
fails the first command on each pooled connection), then held by its replica and written
again every second until the store answers. A retry of that key on that replica settles it
first and replays it, from memory while the store is still away (issue 33). A retry on
another replica waits on the pending key (kept by an append-only Redis) until it is settled;
only a Redis that lost its data as well lets such a retry run again there.
"""

import asyncio
import hashlib
import json
import logging
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final, TypeVar

from fastapi import Request
from prometheus_client import Counter
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from rubricate.common.auth import scope_tenant
from rubricate.common.detached import detached
from rubricate.common.errors import error_json
from rubricate.common.metrics import IDEMPOTENT_REPLAYS
from rubricate.common.redis_client import CancellableRedis, redis_client

log = logging.getLogger("rubricate.common.idempotency")

HEADER: Final = b"idempotency-key"
MAX_KEY_CHARS: Final = 255
DEFAULT_LEASE_S: Final = 30.0
SETTLE_RETRY_S: Final = 1.0
"""How often a result the store could not keep is written again while it is away."""
HOLD_FIRST_S: Final = 0.1
HOLD_MAX_S: Final = 1.0
"""Pauses between the tries of a store call held through an outage (doubling)."""
_PENDING: Final = "pending"
_REPLAY_HEADER: Final = (b"idempotent-replayed", b"true")
_KEPT_HEADERS: Final = frozenset({b"content-type", b"retry-after"})

IDEMPOTENCY_STORE_ERRORS = Counter(
    "rubricate_idempotency_store_errors_total",
    "Idempotency-Key store calls that failed (Redis unreachable), by operation "
    "(claim | get | renew | put | release).",
    ["op"],
)

T = TypeVar("T")


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


def pending_marker(fingerprint: str, owner: str) -> str:
    """`owner`: `<replica>.<request>` (the replica's liveness tells whether it still runs)."""
    return f"{_PENDING}:{fingerprint}|{owner}"


def liveness_key(replica: str) -> str:
    """The entry a replica keeps under a lease while it runs keyed requests."""
    return f"live:{replica}"


def owner_replica(owner: str) -> str:
    return owner.partition(".")[0]


def parse_pending(value: str) -> tuple[str, str] | None:
    """(fingerprint, owner) of a pending marker (owner "" for the older `pending:<fp>`)."""
    if not value.startswith(_PENDING + ":"):
        return None
    fingerprint, _, owner = value[len(_PENDING) + 1 :].partition("|")
    return fingerprint, owner


class IdempotencyStore(ABC):
    @abstractmethod
    async def claim(self, key: str, marker: str, *, lease_s: float) -> str | None:
        """Set `key` to the pending `marker` for `lease_s` unless it exists. None when
        claimed; else the existing entry (a pending marker or a stored response)."""

    @abstractmethod
    async def renew(self, key: str, marker: str, *, lease_s: float) -> bool:
        """Extend the lease of `key` if it still holds `marker`; False when it does not."""

    @abstractmethod
    async def get(self, key: str) -> str | None: ...

    @abstractmethod
    async def put(self, key: str, value: Stored, *, ttl_s: int) -> None: ...

    @abstractmethod
    async def release(self, key: str, marker: str) -> None:
        """Delete `key` if it still holds `marker` (never someone else's claim or result)."""

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

    async def claim(self, key: str, marker: str, *, lease_s: float) -> str | None:
        existing = self._live(key)
        if existing is not None:
            return existing
        self._data[key] = (time.monotonic() + lease_s, marker)
        return None

    async def renew(self, key: str, marker: str, *, lease_s: float) -> bool:
        if self._live(key) != marker:
            return False
        self._data[key] = (time.monotonic() + lease_s, marker)
        return True

    async def get(self, key: str) -> str | None:
        return self._live(key)

    async def put(self, key: str, value: Stored, *, ttl_s: int) -> None:
        self._data[key] = (time.monotonic() + ttl_s, value.dumps())

    async def release(self, key: str, marker: str) -> None:
        if self._live(key) == marker:
            self._data.pop(key, None)


_RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""


class RedisIdempotencyStore(IdempotencyStore):
    """Shared by every gateway replica; SET NX makes the claim atomic, compare-and-set
    scripts keep a renewal or release from touching another owner's entry."""

    def __init__(
        self, url: str, *, prefix: str = "rubricate:idem:", timeout_s: float = 5.0
    ) -> None:
        self._redis: CancellableRedis = redis_client(url, timeout_s=timeout_s, client="idempotency")
        self._prefix = prefix
        self._renew = self._redis.register_script(_RENEW)
        self._release = self._redis.register_script(_RELEASE)

    async def claim(self, key: str, marker: str, *, lease_s: float) -> str | None:
        k = self._prefix + key
        for _ in range(3):  # the entry can expire between SET NX and GET
            if await self._redis.set(k, marker, nx=True, px=_ms(lease_s)):
                return None
            existing = _text(await self._redis.get(k))
            if existing is not None:
                return existing
        raise ConnectionError("the Idempotency-Key entry kept vanishing")

    async def renew(self, key: str, marker: str, *, lease_s: float) -> bool:
        return bool(await self._renew(keys=[self._prefix + key], args=[marker, _ms(lease_s)]))

    async def get(self, key: str) -> str | None:
        return _text(await self._redis.get(self._prefix + key))

    async def put(self, key: str, value: Stored, *, ttl_s: int) -> None:
        await self._redis.set(self._prefix + key, value.dumps(), ex=ttl_s)

    async def release(self, key: str, marker: str) -> None:
        await self._release(keys=[self._prefix + key], args=[marker])

    async def aclose(self) -> None:
        await self._redis.aclose()


class StoreUnavailableError(Exception):
    pass


async def _guarded(op: str, call: Awaitable[T]) -> T:
    """A store call with any failure turned into StoreUnavailableError (and counted)."""
    try:
        return await call
    except Exception as exc:
        IDEMPOTENCY_STORE_ERRORS.labels(op).inc()
        raise StoreUnavailableError(f"{op}: {type(exc).__name__}: {exc}") from exc


async def _held(op: str, call: Callable[[], Awaitable[T]], *, for_s: float) -> T:
    """`call()`, tried again through a store outage until `for_s` seconds after its first
    failure (0.1 s doubling to 1 s between tries); then StoreUnavailableError. Each failed
    try is counted. A restarted Redis fails the first command on each pooled connection, so a
    try or two after it answers again are expected."""
    pause, give_up_at = HOLD_FIRST_S, None
    while True:
        try:
            return await _guarded(op, call())
        except StoreUnavailableError as exc:
            now = time.monotonic()
            if give_up_at is None:
                give_up_at = now + for_s
                log.warning("idempotency.store_unreachable %s: held for %.0fs", exc, for_s)
            if now + pause > give_up_at:
                raise
            await asyncio.sleep(pause)
            pause = min(2 * pause, HOLD_MAX_S)


def _ms(seconds: float) -> int:
    return max(1, int(seconds * 1000))


def _text(value: bytes | str | None) -> str | None:
    return value.decode() if isinstance(value, bytes) else value


def _keep(status: int) -> bool:
    return status < 500 and status not in (409, 429)


def fingerprints(body: bytes, content_type: bytes | None) -> tuple[str, frozenset[str]]:
    """(the fingerprint to store, every fingerprint that counts as the same body).

    A JSON body's fingerprint is the SHA-256 of its canonical form (sorted keys, no
    whitespace); the raw body's hash also matches, for results kept before canonical
    fingerprints (and for bodies that are not JSON)."""
    raw = hashlib.sha256(body).hexdigest()
    if content_type is not None and not _is_json(content_type):
        return raw, frozenset({raw})
    try:
        parsed = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return raw, frozenset({raw})
    canonical = json.dumps(parsed, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    digest = "json:" + hashlib.sha256(canonical.encode()).hexdigest()
    return digest, frozenset({digest, raw})


def _is_json(content_type: bytes) -> bool:
    mime = content_type.split(b";", 1)[0].strip().lower()
    return mime == b"application/json" or mime.endswith(b"+json")


class IdempotencyMiddleware:
    def __init__(
        self,
        app: ASGIApp,
        *,
        store: IdempotencyStore,
        ttl_s: int = 24 * 3600,
        wait_s: float = 900.0,
        poll_s: float = 0.1,
        lease_s: float = DEFAULT_LEASE_S,
        retry_after_s: int = 2,
        outage_s: float | None = None,
    ) -> None:
        if ttl_s <= 0 or wait_s < 0 or lease_s <= 0:
            raise ValueError("ttl_s and lease_s must be positive and wait_s non-negative")
        if outage_s is not None and outage_s < 0:
            raise ValueError("outage_s must be non-negative")
        self.app = app
        self.store = store
        self.ttl_s = ttl_s
        self.wait_s = wait_s
        self.poll_s = poll_s
        self.lease_s = lease_s
        self.retry_after_s = retry_after_s
        self.outage_s = 2 * lease_s if outage_s is None else outage_s
        """How long a store call before the request runs is tried again through an outage
        before the request gets a 503 (0: at once)."""
        self.pending_ttl_s = max(lease_s, wait_s)
        """A pending key lives this long (renewed near its end while its request runs): one
        nobody settles (a lost write) frees after it."""
        self.replica = uuid.uuid4().hex[:16]
        self._running: dict[str, tuple[str, float]] = {}
        """This replica's running keys: their marker and when their pending entry expires."""
        self._unsettled: dict[str, tuple[str, Stored | None, float]] = {}
        """Keys whose result could not be kept or released (the store failed): their marker,
        the result to keep (None: release) and until when to try again."""
        self._liveness: asyncio.Task[None] | None = None
        self._next_renewal = 0.0
        self._detached: set[asyncio.Task[Any]] = set()
        """Claims whose callers may be cancelled, and the releases of keys claimed for callers
        that were (`_give_back`)."""

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
        fingerprint, same = fingerprints(body, headers.get(b"content-type"))
        tenant = scope_tenant(scope)
        key = hashlib.sha256(f"{tenant}\0{scope['path']}\0{idem}".encode()).hexdigest()

        try:
            await self._dedupe(scope, receive, send, key, fingerprint, same, body)
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
                retry_after=self.retry_after_s,
            )

    async def _dedupe(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        key: str,
        fingerprint: str,
        same: frozenset[str],
        body: bytes,
    ) -> None:
        if await self._replayed_unsettled(send, key, same, scope, receive):
            return
        marker = pending_marker(fingerprint, f"{self.replica}.{uuid.uuid4().hex}")
        existing = await self._claim_held(key, marker)
        deadline = time.monotonic() + self.wait_s
        owner_checked = 0.0
        while existing is not None:
            pending = parse_pending(existing)
            if pending is not None:
                if pending[0] not in same:
                    await self._reused(scope, receive, send)
                    return
                if time.monotonic() - owner_checked >= self.lease_s / 3:
                    owner_checked = time.monotonic()
                    if not await self._alive(owner_replica(pending[1])):  # its replica died
                        log.warning("idempotency.takeover key=%s", key[:12])
                        await self._release_held(key, existing)
                        existing = await self._claim_held(key, marker)
                        continue
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
                existing = await _held("get", lambda: self.store.get(key), for_s=self.outage_s)
                if existing is None:  # released after a failure, or expired
                    existing = await self._claim_held(key, marker)
                continue
            try:
                stored = Stored.loads(existing)
            except (ValueError, KeyError, TypeError):
                log.warning("idempotency.corrupt_entry key=%s", key[:12])
                await self._release_held(key, existing)
                existing = await self._claim_held(key, marker)
                continue
            if stored.fingerprint not in same:
                await self._reused(scope, receive, send)
                return
            IDEMPOTENT_REPLAYS.inc()
            await _replay(stored, send)
            return

        await self._run_first(scope, receive, send, key, marker, fingerprint, body)

    async def _replayed_unsettled(
        self, send: Send, key: str, same: frozenset[str], scope: Scope, receive: Receive
    ) -> bool:
        """A key whose result this replica holds but could not write (the store was away) is
        settled before it can run again: written now when the store answers, and replayed
        from memory either way (True). A release still owed is sent first (False)."""
        unsettled = self._unsettled.get(key)
        if unsettled is None:
            return False
        marker, stored, _ = unsettled
        try:
            if stored is not None:
                await self.store.put(key, stored, ttl_s=self.ttl_s)
            else:
                await self.store.release(key, marker)
            self._unsettled.pop(key, None)
            log.info("idempotency.settled key=%s", key[:12])
        except Exception as exc:
            log.warning("idempotency.settle_failed key=%s error=%s", key[:12], _short(exc))
            if stored is None:
                raise StoreUnavailableError(f"release: {_short(exc)}") from exc
        if stored is None:
            return False
        if stored.fingerprint not in same:
            await self._reused(scope, receive, send)
            return True
        IDEMPOTENT_REPLAYS.inc()
        await _replay(stored, send)
        return True

    def _claim(self, key: str, marker: str) -> Awaitable[str | None]:
        return self.store.claim(key, marker, lease_s=self.pending_ttl_s)

    async def _claim_held(self, key: str, marker: str) -> str | None:
        """The claim, held through an outage. A claim tried again after its answer was lost
        (the SET ran, the connection dropped) finds its own marker: it holds the key. A
        caller cancelled while its claim runs (its deadline, a closed connection) leaves
        the claim to finish and gives the key back if it got it: a pending entry of this
        live replica would keep every retry of the key waiting until it expired."""
        claim = detached(
            _held("claim", lambda: self._claim(key, marker), for_s=self.outage_s),
            self._detached,
        )
        try:
            existing = await asyncio.shield(claim)
        except asyncio.CancelledError:
            claim.add_done_callback(lambda done: self._give_back(done, key, marker))
            raise
        return None if existing == marker else existing

    def _give_back(self, claim: "asyncio.Task[str | None]", key: str, marker: str) -> None:
        """Release `key` once `claim` (whose caller is gone) turns out to have taken it."""
        if claim.cancelled() or claim.exception() is not None:
            return
        if claim.result() not in (None, marker):  # another request's entry: not ours
            return
        detached(self._release_held(key, marker), self._detached)

    async def _release_held(self, key: str, marker: str) -> None:
        await _held("release", lambda: self.store.release(key, marker), for_s=self.outage_s)

    async def _alive(self, replica: str) -> bool:
        if replica == self.replica:
            return True
        live = liveness_key(replica)
        return await _held("get", lambda: self.store.get(live), for_s=self.outage_s) is not None

    async def _keep_alive_once(self) -> None:
        """Renew this replica's liveness lease (claim it anew when it lapsed); a failure is
        logged and counted, never raised (the request runs; a retry may take it over)."""
        live = liveness_key(self.replica)
        self._next_renewal = time.monotonic() + self.lease_s / 3 - 0.05
        try:
            if not await self.store.renew(live, self.replica, lease_s=self.lease_s):
                await self.store.claim(live, self.replica, lease_s=self.lease_s)
        except Exception as exc:
            IDEMPOTENCY_STORE_ERRORS.labels("renew").inc()
            log.warning("idempotency.renew_failed replica=%s error=%s", self.replica, _short(exc))

    async def _keep_alive(self) -> None:
        """One liveness lease per replica, renewed every `lease_s / 3` while it runs keyed
        requests (then left to lapse); a request that runs for nearly `pending_ttl_s` has
        its pending entry extended."""
        while self._running or self._unsettled:
            # what is unsettled is written again every second (a retry on another replica
            # waits on its pending key meanwhile); the liveness every third of the lease
            period = self.lease_s / 3
            await asyncio.sleep(min(period, SETTLE_RETRY_S) if self._unsettled else period)
            if self._running and time.monotonic() >= self._next_renewal:
                await self._keep_alive_once()
                await self._extend_long_runners()
            await self._settle_again()

    async def _settle_again(self) -> None:
        """Keep (or release) what a store failure left pending, once the store answers: a
        retry is not held up by a key its owner could not settle."""
        for key, (marker, stored, until) in list(self._unsettled.items()):
            if time.monotonic() > until:  # the pending entry has expired by now
                self._unsettled.pop(key, None)
                continue
            try:
                if stored is not None:
                    await self.store.put(key, stored, ttl_s=self.ttl_s)
                else:
                    await self.store.release(key, marker)
            except Exception as exc:  # counted once, when it first failed
                log.warning("idempotency.settle_failed key=%s error=%s", key[:12], _short(exc))
                return  # the store is still down: the next period tries again
            self._unsettled.pop(key, None)
            log.info("idempotency.settled key=%s", key[:12])

    async def _extend_long_runners(self) -> None:
        soon = time.monotonic() + self.lease_s
        for key, (marker, expires) in list(self._running.items()):
            if expires > soon or key not in self._running:
                continue
            try:
                if await self.store.renew(key, marker, lease_s=self.pending_ttl_s):
                    self._running[key] = (marker, time.monotonic() + self.pending_ttl_s)
                else:
                    log.warning("idempotency.lease_lost key=%s", key[:12])
            except Exception as exc:
                IDEMPOTENCY_STORE_ERRORS.labels("renew").inc()
                log.warning("idempotency.renew_failed key=%s error=%s", key[:12], _short(exc))

    async def _start_running(self, key: str, marker: str) -> None:
        self._running[key] = (marker, time.monotonic() + self.pending_ttl_s)
        if self._liveness is None or self._liveness.done():
            await self._keep_alive_once()  # in force before the request runs
            self._liveness = asyncio.create_task(self._keep_alive(), name="idempotency-liveness")

    async def _run_first(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        key: str,
        marker: str,
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
            await self._start_running(key, marker)  # a cancel here gives the key back too
            await self.app(scope, replay_receive, capture)
        except BaseException:
            if not await self._settle("release", self.store.release(key, marker), key):
                self._later(key, marker, None)
            raise
        finally:
            self._running.pop(key, None)
        if _keep(status):
            stored = Stored(
                fingerprint=fingerprint, status=status, headers=kept, body=b"".join(chunks)
            )
            # a Redis that restarted meanwhile fails the first command on each pooled
            # connection: one more try at once; never a release instead (the key would run
            # again). Still failing: kept here, written again every second and before a
            # retry of the key runs on this replica (it then replays it from here)
            saved = await self._settle("put", self.store.put(key, stored, ttl_s=self.ttl_s), key)
            if not saved and not await self._settle(
                "put", self.store.put(key, stored, ttl_s=self.ttl_s), key
            ):
                self._later(key, marker, stored)
        elif not await self._settle("release", self.store.release(key, marker), key):
            self._later(key, marker, None)

    def _later(self, key: str, marker: str, stored: Stored | None) -> None:
        """Settle `key` again every `lease_s / 3` until the store answers (or it expired)."""
        self._unsettled[key] = (marker, stored, time.monotonic() + self.pending_ttl_s)
        if self._liveness is None or self._liveness.done():
            self._liveness = asyncio.create_task(self._keep_alive(), name="idempotency-liveness")

    async def _settle(self, op: str, call: Awaitable[None], key: str) -> bool:
        """A store write after the response went out: a failure is logged and counted, never
        raised (the client has its answer; `_later` settles it when the store is back)."""
        try:
            await call
            return True
        except Exception as exc:
            IDEMPOTENCY_STORE_ERRORS.labels(op).inc()
            log.warning(
                "idempotency.%s_failed key=%s error=%s: tried again every third of the lease "
                "until the store answers",
                op,
                key[:12],
                _short(exc),
            )
            return False

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


def _short(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:200]


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
