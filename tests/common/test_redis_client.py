"""The Redis client every store opens (`common.redis_client`), on a real Redis: cancelling a
task during a command always stops it (redis-py on Python 3.11 dropped such cancellations,
which left lease-renewal loops running and CI hung), and the command itself still completes
on a clean connection."""

import asyncio

import pytest
import redis

from rubricate.common.redis_client import CancellableRedis
from rubricate.common.redis_client import redis_client as open_client


@pytest.fixture
async def client(redis_url: str, redis_client: "redis.Redis[str]") -> CancellableRedis:
    assert redis_client.ping()  # flushed
    return open_client(redis_url, timeout_s=5)


async def test_a_task_cancelled_during_a_command_stops(client: CancellableRedis) -> None:
    """A loop that keeps going on store errors, as lease renewals do, cancelled at every
    step of its commands: each cancellation ends it."""
    renew = client.register_script("return redis.call('SET', KEYS[1], ARGV[1], 'PX', 5000)")

    async def renewing() -> None:
        while True:
            try:
                await renew(keys=["lease"], args=["me"])
                await client.hmget("meta", ["a", "b"])
            except Exception:
                pass

    lost = []
    for step in range(60):
        for _ in range(3):
            task = asyncio.create_task(renewing())
            for _ in range(step):
                await asyncio.sleep(0)
            task.cancel()
            done, _ = await asyncio.wait([task], timeout=2.0)
            if not done:
                lost.append(step)
                break
        if lost:
            break
    assert lost == [], f"cancellations lost after {lost} event-loop steps"
    assert await client.get("lease") == "me"  # the connection still answers
    await client.aclose()


async def test_commands_after_cancelled_ones_get_their_own_replies(
    client: CancellableRedis,
) -> None:
    for step in range(30):
        task = asyncio.create_task(client.set(f"k{step}", f"v{step}"))
        for _ in range(step % 7):
            await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # a stale reply on a pooled connection would show up here as another key's value
        assert await client.get(f"probe{step}") is None
        assert await client.incr(f"n{step}") == 1
    await client.aclose()


async def test_a_command_whose_caller_was_cancelled_completes_before_close(
    client: CancellableRedis, redis_client: "redis.Redis[str]"
) -> None:
    task = asyncio.create_task(client.set("late", "1"))
    await asyncio.sleep(0)  # the command has started
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await client.aclose()
    assert redis_client.get("late") == "1"
