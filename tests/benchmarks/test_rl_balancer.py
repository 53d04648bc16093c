"""The RL-step benchmark's TCP balancer (`benchmarks/rl_balancer.py`): connections alternate
between the replicas, and a replica that is gone for good (its port refuses connections) is
skipped, as a real balancer's health check does, instead of closing every other client
connection (issue 33's "one of two gateway replicas killed for good")."""

import asyncio
import contextlib

from benchmarks.rl_balancer import serve

from tests.support.servers import free_port


async def replica(name: bytes) -> asyncio.Server:
    """A server that answers each connection with its name."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(name)
        await writer.drain()
        writer.close()

    return await asyncio.start_server(answer, "127.0.0.1", 0)


async def ask(port: int) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        return await asyncio.wait_for(reader.read(), timeout=5)
    finally:
        writer.close()


async def test_connections_alternate_and_a_dead_replica_is_skipped() -> None:
    a, b = await replica(b"a"), await replica(b"b")
    ports = [s.sockets[0].getsockname()[1] for s in (a, b)]
    port = free_port()
    balancer = asyncio.create_task(
        serve("127.0.0.1", port, [("127.0.0.1", p) for p in ports], down_s=60.0)
    )
    try:
        for _ in range(100):  # listening
            with contextlib.suppress(OSError):
                await ask(port)
                break
            await asyncio.sleep(0.05)
        assert sorted([await ask(port) for _ in range(4)]) == [b"a", b"a", b"b", b"b"]
        b.close()
        await b.wait_closed()  # replica b is gone for good: its port refuses connections
        answers = [await ask(port) for _ in range(6)]
        assert answers == [b"a"] * 6  # before: every other connection was closed unanswered
    finally:
        balancer.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await balancer
        a.close()
