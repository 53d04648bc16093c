import asyncio

import pytest
import redis

from rubricate.common.cache import GuardedCache, MemoryCache, RedisCache


@pytest.fixture(params=["memory", "redis"])
async def cache(request: pytest.FixtureRequest, redis_url: str) -> "MemoryCache | RedisCache":
    if request.param == "memory":
        return MemoryCache()
    client: redis.Redis[str] = request.getfixturevalue("redis_client")  # flushes the db
    assert client.ping()
    return RedisCache(redis_url)


async def test_get_set_delete(cache: "MemoryCache | RedisCache") -> None:
    assert await cache.get("k") is None
    assert await cache.set("k", "v1", ttl_s=60)
    assert await cache.get("k") == "v1"
    await cache.delete("k")
    assert await cache.get("k") is None
    assert await cache.ping()
    await cache.aclose()


async def test_ttl(cache: "MemoryCache | RedisCache") -> None:
    await cache.set("k", "v", ttl_s=0.05)
    await asyncio.sleep(0.15)
    assert await cache.get("k") is None
    await cache.aclose()


async def test_versioned_set_never_replaces_a_newer_entry(
    cache: "MemoryCache | RedisCache",
) -> None:
    assert await cache.set("k", "v3", ttl_s=60, version=3)
    assert not await cache.set("k", "v2", ttl_s=60, version=2)
    assert not await cache.set("k", "v3 again", ttl_s=60, version=3)
    assert await cache.get("k") == "v3"
    assert await cache.set("k", "v4", ttl_s=60, version=4)
    assert await cache.get("k") == "v4"
    assert await cache.set("k", "unversioned", ttl_s=60)
    assert await cache.set("k", "v1", ttl_s=60, version=1)
    assert await cache.get("k") == "v1"
    await cache.aclose()


async def test_memory_cache_evicts_least_recently_used() -> None:
    cache = MemoryCache(max_entries=2)
    await cache.set("a", "1", ttl_s=60)
    await cache.set("b", "2", ttl_s=60)
    assert await cache.get("a") == "1"
    await cache.set("c", "3", ttl_s=60)
    assert await cache.get("b") is None
    assert await cache.get("a") == "1"


class FlakyCache(MemoryCache):
    def __init__(self) -> None:
        super().__init__()
        self.down = False
        self.calls = 0

    def _check(self) -> None:
        self.calls += 1
        if self.down:
            raise ConnectionError("cache down")

    async def get(self, key: str) -> str | None:
        self._check()
        return await super().get(key)

    async def set(self, key: str, value: str, *, ttl_s: float, version: int | None = None) -> bool:
        self._check()
        return await super().set(key, value, ttl_s=ttl_s, version=version)

    async def delete(self, key: str) -> None:
        self._check()
        await super().delete(key)

    async def ping(self) -> bool:
        self._check()
        return True


async def test_guarded_cache_bypasses_a_failing_cache_then_recovers() -> None:
    inner = FlakyCache()
    cache = GuardedCache(inner, retry_after_s=0.1)
    assert await cache.set("k", "old", ttl_s=60, version=1)

    inner.down = True
    assert await cache.get("k") is None  # the error is swallowed: a miss
    calls = inner.calls
    assert await cache.get("k") is None  # bypassed: the cache is not even asked
    assert not await cache.set("k", "new", ttl_s=60, version=2)  # a write during the outage
    assert inner.calls == calls
    assert not await cache.ping()

    inner.down = False  # back, but still holding the entry from before the outage
    await asyncio.sleep(0.15)
    assert await cache.get("k") is None  # the key written meanwhile was cleared first
    assert await cache.set("k", "new", ttl_s=60, version=2)
    assert await cache.get("k") == "new"
    assert await cache.ping()


async def test_redis_cache_on_a_closed_port_raises_quickly() -> None:
    cache = RedisCache("redis://127.0.0.1:1/0", timeout_s=0.5)
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(redis.ConnectionError):
        await cache.get("k")
    assert loop.time() - started < 2.0
    await cache.aclose()
