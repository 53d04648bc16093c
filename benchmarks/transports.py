"""HTTP vs gRPC through the SDK: latency and throughput of the same calls on one gateway.

Starts the platform in process (FakeJudgeBackend: instant, judges nothing) and times
`stagewise_advantages` (pure math: the transports' own cost) and `get_reward` for a batch of
8 samples (orchestration + fake judge) over both transports at a given concurrency. Prints
figures; asserts nothing.  Usage: python benchmarks/transports.py [--calls 400] [--concurrency 16]
"""

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from rubricate.embedded import SERVICES, EmbeddedPlatform
from rubricate.testing.fake_judge import FakeJudgeBackend
from rubricate_client import AsyncClient, AsyncGrpcClient

ADVANTAGES = {"scores": [[i / 8, 0.5, 0.25, 1.0] for i in range(8)]}


def trajectory(i: int) -> str:
    marker = ("[[excellent]]", "", "[[poor]]")[i % 3]
    return (
        f"<structured_plan>plan {marker}</structured_plan>"
        f'<call_tool name="search">q</call_tool><tool_output>o</tool_output>'
        f"<think>a</think><review>r {marker}</review><answer>final {marker}</answer>"
    )


REWARD = {
    "query": [trajectory(i) for i in range(8)],
    "labels": [{"question": "Why?", "question_id": "bench"}] * 8,
}


async def measure(
    call: Callable[[], Awaitable[Any]], *, calls: int, concurrency: int
) -> tuple[float, float, float]:
    gate = asyncio.Semaphore(concurrency)
    latencies: list[float] = []

    async def one() -> None:
        async with gate:
            started = time.perf_counter()
            await call()
            latencies.append(time.perf_counter() - started)

    await call()  # warm-up: connections, first-call imports
    started = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(calls)))
    wall = time.perf_counter() - started
    q = statistics.quantiles(latencies, n=100)
    return q[49] * 1000, q[98] * 1000, calls / wall


async def main(calls: int, concurrency: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        platform = EmbeddedPlatform(
            data_dir=Path(tmp), ports=dict.fromkeys(SERVICES, 0), backend=FakeJudgeBackend()
        )
        async with (
            platform,
            AsyncClient(platform.urls["gateway"], max_connections=concurrency) as http,
            AsyncGrpcClient(platform.urls["gateway-grpc"]) as rpc,
        ):
            print(f"{calls} calls, {concurrency} in flight, one process (gateway + upstreams)")
            print(f"{'call':<24}{'transport':<10}{'p50 ms':>9}{'p99 ms':>9}{'calls/s':>10}")
            for name, n, clients in (
                ("stagewise_advantages", calls, {"http": http, "grpc": rpc}),
                ("get_reward (8 samples)", max(20, calls // 10), {"http": http, "grpc": rpc}),
            ):
                for transport, client in clients.items():
                    if name.startswith("stagewise"):

                        async def call(c: Any = client) -> Any:
                            return await c.stagewise_advantages(ADVANTAGES)
                    else:

                        async def call(c: Any = client) -> Any:
                            return await c.get_reward(REWARD)

                    p50, p99, rate = await measure(call, calls=n, concurrency=concurrency)
                    print(f"{name:<24}{transport:<10}{p50:>9.2f}{p99:>9.2f}{rate:>10.1f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    asyncio.run(main(args.calls, args.concurrency))
