"""A tiny round-robin TCP load balancer for the RL-step benchmark's two-replica run.

Each accepted connection goes to the next upstream in turn and bytes are copied both ways
until either side closes. A trainer that opens one connection per in-flight request (all of
OpenRLHF's samples at once) so has every group split across the replicas.

An upstream that refuses a connection (or does not accept it within `--connect-s`) is
skipped, as a real balancer's passive health check does: the connection goes to the next
one, and the failed upstream gets no new connection for `--down-s` (then it is tried
again). Connections already open to an upstream that dies are lost with it (the client's
retry comes back through the balancer). When every upstream refuses, the client's
connection is closed.

    python benchmarks/rl_balancer.py --port 8100 --upstream 127.0.0.1:8000,127.0.0.1:8010
"""

import argparse
import asyncio
import contextlib
import itertools
import time


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.close()


class Upstreams:
    """Round-robin over the upstreams, skipping those that refused a connection lately."""

    def __init__(self, upstreams: list[tuple[str, int]], *, down_s: float) -> None:
        self.upstreams = upstreams
        self.down_s = down_s
        self._turn = itertools.count()
        self._down_until: dict[tuple[str, int], float] = {}

    def order(self) -> list[tuple[str, int]]:
        """Every upstream, starting with the next in turn; those marked down last (a
        connection still goes to one when every upstream is marked down)."""
        start = next(self._turn) % len(self.upstreams)
        turn = self.upstreams[start:] + self.upstreams[:start]
        now = time.monotonic()
        return sorted(turn, key=lambda up: self._down_until.get(up, 0.0) > now)

    def failed(self, upstream: tuple[str, int]) -> None:
        self._down_until[upstream] = time.monotonic() + self.down_s

    def worked(self, upstream: tuple[str, int]) -> None:
        self._down_until.pop(upstream, None)


async def connect(
    pool: Upstreams, *, connect_s: float
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
    """A connection to the first upstream (in `pool.order()`) that accepts one."""
    for upstream in pool.order():
        try:
            async with asyncio.timeout(connect_s):
                streams = await asyncio.open_connection(*upstream)
        except (OSError, TimeoutError):
            pool.failed(upstream)
            continue
        pool.worked(upstream)
        return streams
    return None


async def serve(
    host: str,
    port: int,
    upstreams: list[tuple[str, int]],
    *,
    down_s: float = 2.0,
    connect_s: float = 2.0,
) -> None:
    pool = Upstreams(upstreams, down_s=down_s)

    async def handle(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        streams = await connect(pool, connect_s=connect_s)
        if streams is None:
            client_w.close()
            return
        up_r, up_w = streams
        await asyncio.gather(_pipe(client_r, up_w), _pipe(up_r, client_w))

    server = await asyncio.start_server(handle, host, port, backlog=8192)
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--upstream", required=True, help="host:port,host:port")
    parser.add_argument("--down-s", type=float, default=2.0, help="skip a refusing upstream")
    parser.add_argument("--connect-s", type=float, default=2.0, help="connect timeout")
    args = parser.parse_args()
    upstreams = []
    for item in args.upstream.split(","):
        host, _, port = item.rpartition(":")
        upstreams.append((host, int(port)))
    asyncio.run(
        serve(args.host, args.port, upstreams, down_s=args.down_s, connect_s=args.connect_s)
    )


if __name__ == "__main__":
    main()
