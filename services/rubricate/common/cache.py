"""The buffer read cache: Redis in production, an in-process dict in embedded mode.

Entries carry the buffer's version, and `set(..., version=v)` never replaces a newer
entry: a reader that loaded an older buffer from the database cannot overwrite what a
writer published after its commit, and writers publishing out of order cannot either.
`GuardedCache` makes the cache optional: a failing cache is skipped for a few seconds,
with a warning, and every request goes to the database meanwhile.
"""

import logging
import time
from collections import OrderedDict
from typing import Protocol

from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from rubricate.common.metrics import CACHE_LOOKUPS, CACHE_UP
from rubricate.common.redis_client import CancellableRedis, redis_client

log = logging.getLogger("rubricate.common.cache")


class Cache(Protocol):
    async def get(self, key: str) -> str | None:
        """The value, or None when absent or expired."""
        ...

    async def set(self, key: str, value: str, *, ttl_s: float, version: int | None = None) -> bool:
        """Store `value` for `ttl_s` seconds. With `version`, an entry stored with a version
        at least as high is kept instead. True when stored."""
        ...

    async def delete(self, key: str) -> None: ...

    async def ping(self) -> bool: ...

    async def aclose(self) -> None: ...


class MemoryCache:
    """In-process cache with per-entry TTL and LRU eviction (embedded mode, tests)."""

    def __init__(self, *, max_entries: int = 10_000) -> None:
        self.max_entries = max_entries
        self._data: OrderedDict[str, tuple[str, int | None, float]] = OrderedDict()

    async def get(self, key: str) -> str | None:
        entry = self._data.get(key)
        if entry is None:
            return None
        value, _, expires = entry
        if expires <= time.monotonic():
            del self._data[key]
            return None
        self._data.move_to_end(key)
        return value

    async def set(self, key: str, value: str, *, ttl_s: float, version: int | None = None) -> bool:
        now = time.monotonic()
        current = self._data.get(key)
        if (
            version is not None
            and current is not None
            and current[2] > now
            and current[1] is not None
            and current[1] >= version
        ):
            return False
        self._data[key] = (value, version, now + ttl_s)
        self._data.move_to_end(key)
        while len(self._data) > self.max_entries:
            self._data.popitem(last=False)
        return True

    async def delete(self, key: str) -> None:
        self._data.pop(key, None)

    async def ping(self) -> bool:
        return True

    async def aclose(self) -> None:
        self._data.clear()


# An entry is a hash {d: value, v: version}; one key, so it works on Redis Cluster too.
_SET_LUA = """
if ARGV[2] ~= '' then
  local cur = redis.call('HGET', KEYS[1], 'v')
  if cur and cur ~= '' and tonumber(cur) >= tonumber(ARGV[2]) then
    return 0
  end
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'd', ARGV[1], 'v', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
"""


class RedisCache:
    """Redis (redis.asyncio), no retries and short timeouts: a miss is cheaper than a wait."""

    def __init__(self, url: str, *, timeout_s: float = 0.5) -> None:
        self.url = url
        self._redis: CancellableRedis = redis_client(
            url, timeout_s=timeout_s, retry=Retry(NoBackoff(), 0), client="buffer_cache"
        )
        self._set = self._redis.register_script(_SET_LUA)

    async def get(self, key: str) -> str | None:
        value = await self._redis.hget(key, "d")
        return value if isinstance(value, str) else None

    async def set(self, key: str, value: str, *, ttl_s: float, version: int | None = None) -> bool:
        ttl_ms = max(1, int(ttl_s * 1000))
        args = [value, "" if version is None else str(version), str(ttl_ms)]
        stored = await self._set(keys=[key], args=args)
        return bool(stored)

    async def delete(self, key: str) -> None:
        await self._redis.delete(key)

    async def ping(self) -> bool:
        return bool(await self._redis.ping())

    async def aclose(self) -> None:
        await self._redis.aclose()


class GuardedCache:
    """Wraps a cache so that it never fails a request.

    After an error the cache is bypassed for `retry_after_s`; keys whose publication or
    deletion failed meanwhile are deleted as soon as the cache answers again, so an entry
    written before the outage cannot outlive a write made during it.
    """

    def __init__(
        self, inner: Cache, *, retry_after_s: float = 5.0, max_dirty_keys: int = 10_000
    ) -> None:
        self.inner = inner
        self.retry_after_s = retry_after_s
        self.max_dirty_keys = max_dirty_keys
        self._down_until = 0.0
        self._failing = False
        self._dirty: set[str] = set()
        CACHE_UP.set(1)

    @property
    def available(self) -> bool:
        return time.monotonic() >= self._down_until

    def _fail(self, op: str, exc: BaseException) -> None:
        self._down_until = time.monotonic() + self.retry_after_s
        CACHE_UP.set(0)
        if not self._failing:
            self._failing = True
            log.warning(
                "store.cache_unavailable op=%s error=%s: %s; reading from the database, "
                "retrying the cache in %.0fs",
                op,
                type(exc).__name__,
                exc,
                self.retry_after_s,
            )

    async def _recovered(self) -> bool:
        """After a failure streak, clear the keys written meanwhile before using the cache."""
        if not self._failing:
            return True
        try:
            for key in list(self._dirty):
                await self.inner.delete(key)
                self._dirty.discard(key)
        except Exception as exc:
            self._fail("recover", exc)
            return False
        self._failing = False
        CACHE_UP.set(1)
        log.warning("store.cache_recovered")
        return True

    def _mark_dirty(self, key: str) -> None:
        if len(self._dirty) < self.max_dirty_keys:
            self._dirty.add(key)

    async def get(self, key: str) -> str | None:
        if not self.available:
            CACHE_LOOKUPS.labels("bypass").inc()
            return None
        try:
            if not await self._recovered():
                CACHE_LOOKUPS.labels("error").inc()
                return None
            value = await self.inner.get(key)
        except Exception as exc:
            CACHE_LOOKUPS.labels("error").inc()
            self._fail("get", exc)
            return None
        CACHE_LOOKUPS.labels("miss" if value is None else "hit").inc()
        return value

    async def set(self, key: str, value: str, *, ttl_s: float, version: int | None = None) -> bool:
        if not self.available:
            self._mark_dirty(key)
            return False
        try:
            if not await self._recovered():
                self._mark_dirty(key)
                return False
            return await self.inner.set(key, value, ttl_s=ttl_s, version=version)
        except Exception as exc:
            self._mark_dirty(key)
            self._fail("set", exc)
            return False

    async def delete(self, key: str) -> None:
        if not self.available:
            self._mark_dirty(key)
            return
        try:
            if await self._recovered():
                await self.inner.delete(key)
            else:
                self._mark_dirty(key)
        except Exception as exc:
            self._mark_dirty(key)
            self._fail("delete", exc)

    async def ping(self) -> bool:
        try:
            return await self.inner.ping()
        except Exception:
            return False

    async def aclose(self) -> None:
        try:
            await self.inner.aclose()
        except Exception as exc:
            log.warning("store.cache_close_failed error=%s", exc)
