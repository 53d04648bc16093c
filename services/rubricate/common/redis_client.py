"""The asyncio Redis client every Redis store opens (`redis_client(url, ...)`): a call stays
cancellable.

Cancelling a task while redis-py (8.x) runs a command in it is not safe on Python 3.11:
- a command is sent under `asyncio.wait_for`, which on 3.11 returns the result and drops the
  cancellation when the send finishes as the task is cancelled (CPython gh-86296, fixed in
  3.12). The task goes on as if nothing happened: a lease-renewal loop never stops, a request
  outlives its deadline, a shutdown waits forever;
- a cancellation while the pool hands out a connection can leave the pool spinning.

So the caller's cancellation never reaches redis-py: each command runs in a task of its own,
awaited through `asyncio.shield`. A cancelled caller gets `CancelledError` at once, and its
command finishes on its own (bounded by the socket timeouts), leaving its connection clean
for the next command. `aclose()` lets the commands still running finish before it closes the
pool.
"""

import asyncio
from typing import Any, cast

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry

from rubricate.common.detached import detached
from rubricate.common.metrics import REDIS_COMMANDS

CLOSE_GRACE_S = 2.0
"""How long `aclose()` waits for commands still running (their callers were cancelled)."""


class CancellableRedis(aioredis.Redis):
    """`redis.asyncio.Redis` whose commands (scripts included) are shielded from the caller's
    cancellation, see the module docstring. Pipelines and pub/sub are not covered (the
    rendezvous' signal listener stops on a flag, not by cancellation). Each command counts in
    `rubricate_redis_commands_total{client}`."""

    client_name = "other"
    """The `client` label of the command counter (set by `redis_client`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._running: set[asyncio.Task[Any]] = set()
        self._counted = REDIS_COMMANDS.labels(self.client_name)

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        self._counted.inc()
        command = super().execute_command(*args, **options)  # type: ignore[no-untyped-call]
        # a command whose caller was cancelled runs on; nobody reads its error (the next
        # command sees the same failure)
        return await asyncio.shield(detached(command, self._running))

    async def aclose(self, close_connection_pool: bool | None = None) -> None:
        if self._running:
            await asyncio.wait(list(self._running), timeout=CLOSE_GRACE_S)
        await super().aclose(close_connection_pool)


DEFAULT_MAX_CONNECTIONS = 32
"""Connections of one client's pool. A command that finds them all busy waits for one (a
blocking pool) instead of failing with "Too many connections"."""


def redis_client(
    url: str,
    *,
    timeout_s: float,
    retry: Retry | None = None,
    decode_responses: bool = True,
    max_connections: int = DEFAULT_MAX_CONNECTIONS,
    client: str = "other",
) -> CancellableRedis:
    """A client for `url` with `timeout_s` to connect and per socket operation, and at
    most `max_connections` connections (callers queue for a free one, up to twice
    `timeout_s`); `retry`: redis-py's retry policy (None: its default); `client`: its name in
    the command counter."""
    options: dict[str, Any] = {
        "decode_responses": decode_responses,
        "socket_timeout": timeout_s,
        "socket_connect_timeout": timeout_s,
    }
    if retry is not None:
        options["retry"] = retry
    pool = aioredis.BlockingConnectionPool.from_url(
        url, max_connections=max_connections, timeout=2 * timeout_s, **options
    )
    named: type[CancellableRedis] = type(
        f"CancellableRedis[{client}]", (CancellableRedis,), {"client_name": client}
    )
    return cast(CancellableRedis, named.from_pool(pool))
