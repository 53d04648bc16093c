"""A tiny round-robin TCP load balancer for the RL-step benchmark's two-replica run.

Each accepted connection goes to the next upstream in turn and bytes are copied both ways
until either side closes. A trainer that opens one connection per in-flight request (all of
OpenRLHF's samples at once) so has every group split across the replicas.

    python benchmarks/rl_balancer.py --port 8100 --upstream 127.0.0.1:8000,127.0.0.1:8010
"""

import argparse
import asyncio
import contextlib
import itertools


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


async def serve(host: str, port: int, upstreams: list[tuple[str, int]]) -> None:
    turn = itertools.cycle(upstreams)

    async def handle(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        up_host, up_port = next(turn)
        try:
            up_r, up_w = await asyncio.open_connection(up_host, up_port)
        except OSError:
            client_w.close()
            return
        await asyncio.gather(_pipe(client_r, up_w), _pipe(up_r, client_w))

    server = await asyncio.start_server(handle, host, port, backlog=8192)
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--upstream", required=True, help="host:port,host:port")
    args = parser.parse_args()
    upstreams = []
    for item in args.upstream.split(","):
        host, _, port = item.rpartition(":")
        upstreams.append((host, int(port)))
    asyncio.run(serve(args.host, args.port, upstreams))


if __name__ == "__main__":
    main()
