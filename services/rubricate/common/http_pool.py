"""An HTTP client pool that stays cheap with hundreds of connections in flight.

httpcore (httpx 0.28's transport) walks every connection of a pool, asking each whether it
is idle or expired (a `getpeername` system call apiece), each time a request starts or ends.
With a few hundred connections in flight that walk is the largest CPU cost of a service: it
was about 40 % of the gateway's and the verifier's CPU in `benchmarks/rl_step.py` (py-spy).
`ShardedClient` spreads the connections over several `httpx.AsyncClient`s of at most
`PER_SHARD` connections each and hands out one per request, round robin, so each walk is
short. Same base URL, timeout, headers and transport on every shard.
"""

import itertools
import math
from collections.abc import Sequence
from typing import Any, Final

import httpx

PER_SHARD: Final = 32
"""Connections of one shard: the longest walk a request pays for."""


class ShardedClient:
    def __init__(
        self,
        *,
        max_connections: int,
        max_keepalive_connections: int | None = None,
        per_shard: int = PER_SHARD,
        **client_options: Any,
    ) -> None:
        """`client_options`: what `httpx.AsyncClient` takes besides `limits` (the same for
        every shard)."""
        if max_connections < 1 or per_shard < 1:
            raise ValueError("max_connections and per_shard must be at least 1")
        shards = math.ceil(max_connections / per_shard)
        size = math.ceil(max_connections / shards)
        keepalive = max_keepalive_connections if max_keepalive_connections is not None else size
        limits = httpx.Limits(
            max_connections=size, max_keepalive_connections=min(size, math.ceil(keepalive / shards))
        )
        self.clients: Sequence[httpx.AsyncClient] = [
            httpx.AsyncClient(limits=limits, **client_options) for _ in range(shards)
        ]
        self._turn = itertools.cycle(self.clients)

    def next(self) -> httpx.AsyncClient:
        """The shard for the next request."""
        return next(self._turn)

    async def aclose(self) -> None:
        for client in self.clients:
            await client.aclose()
