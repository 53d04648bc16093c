"""Stagewise judge benchmark. Prints figures; asserts nothing.

1. A group of 8 rollouts against the embedded model (real CPU inference): wall time, LLM
   calls, prompt and completion tokens.
2. The gateway's own overhead per request (time not spent waiting on upstream services) at
   50 concurrent requests against an instant fake backend. Target: p99 under 5 ms.
   The gateway, the upstream services and the load generator run in three processes, so
   neither the upstreams' nor the client's work lands on the gateway's event loop (on a
   2-core machine they still share the CPUs).

    python benchmarks/stagewise.py [--skip-model] [--requests 500] [--concurrency 50]
"""

import argparse
import asyncio
import json
import multiprocessing as mp
import statistics
import sys
import tempfile
import time
from importlib import resources
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from rubricate.embedded import SERVICES, EmbeddedPlatform, free_port
from rubricate.gateway.app import create_app as create_gateway
from rubricate.gateway.settings import GatewaySettings


def example_group(n: int) -> dict[str, Any]:
    text = resources.files("rubricate.examples").joinpath("stagewise_group.json").read_text()
    group: dict[str, Any] = json.loads(text)
    base = group["rollouts"]
    group["rollouts"] = [
        {"id": f"{base[i % len(base)]['id']}-{i}", "trajectory": base[i % len(base)]["trajectory"]}
        for i in range(n)
    ]
    return group


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def model_group(n: int) -> None:
    print(f"== {n} rollouts against the embedded model (CPU) ==", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        async with EmbeddedPlatform(data_dir=Path(tmp), ports=dict.fromkeys(SERVICES, 0)) as p:
            load_s = time.perf_counter() - t0
            async with httpx.AsyncClient(base_url=p.urls["gateway"], timeout=3600) as client:
                t1 = time.perf_counter()
                response = await client.post("/v1/stagewise/score", json=example_group(n))
                wall = time.perf_counter() - t1
    if response.status_code != 200:
        print(f"request failed: HTTP {response.status_code} {response.text[:500]}")
        return
    out = response.json()
    usage = out["usage"]
    fallbacks = sum(1 for r in out["rollouts"] if r["fallback"])
    print(f"model load + start-up        {load_s:8.1f} s")
    print(f"wall time (one request)      {wall:8.1f} s")
    print(f"LLM calls                    {usage['calls']:8d}")
    print(f"prompt tokens                {usage['prompt_tokens']:8d}")
    print(f"completion tokens            {usage['completion_tokens']:8d}")
    print(f"model time                   {usage['latency_s']:8.1f} s")
    print(f"generation                   {out['generation']['status']:>8}")
    print(f"rollouts with a fallback     {fallbacks:8d}")


def _serve_upstreams(ports: dict[str, int], ready: Any) -> None:
    from rubricate.testing.fake_judge import FakeJudgeBackend

    async def main() -> None:
        with tempfile.TemporaryDirectory() as tmp:
            platform = EmbeddedPlatform(data_dir=Path(tmp), ports=ports, backend=FakeJudgeBackend())
            async with platform:
                ready.set()
                await asyncio.Event().wait()

    asyncio.run(main())


def _serve_gateway(settings: dict[str, Any], port: int, ready: Any) -> None:
    config = uvicorn.Config(
        create_gateway(GatewaySettings(**settings)),
        host="127.0.0.1",
        port=port,
        log_level="warning",
        access_log=False,
    )
    server = uvicorn.Server(config)

    async def main() -> None:
        serve = asyncio.create_task(server.serve())
        while not server.started:  # noqa: ASYNC110 - uvicorn exposes a flag, not an event
            await asyncio.sleep(0.05)
        ready.set()
        await serve

    asyncio.run(main())


async def gateway_overhead(*, requests: int, concurrency: int, rollouts: int) -> None:
    print(
        f"\n== gateway overhead: {requests} requests of {rollouts} rollouts, "
        f"{concurrency} concurrent, instant fake backend ==",
        flush=True,
    )
    ports = {name: free_port() for name in SERVICES}
    ctx = mp.get_context("spawn")
    ready = ctx.Event()
    upstreams = ctx.Process(target=_serve_upstreams, args=(ports, ready), daemon=True)
    upstreams.start()
    if not ready.wait(120):
        print("upstream services did not start")
        upstreams.kill()
        return
    settings = GatewaySettings(
        rubric_generator_url=f"http://127.0.0.1:{ports['rubric-generator']}",
        verifier_url=f"http://127.0.0.1:{ports['verifier']}",
        store_url=f"http://127.0.0.1:{ports['store']}",
    )
    gport = free_port()
    gateway_ready = ctx.Event()
    gateway = ctx.Process(
        target=_serve_gateway, args=(settings.model_dump(), gport, gateway_ready), daemon=True
    )
    gateway.start()
    if not gateway_ready.wait(60):
        print("gateway did not start")
        gateway.kill()
        upstreams.kill()
        return
    group = example_group(rollouts)
    overheads: list[float] = []
    totals: list[float] = []
    errors = 0
    gate = asyncio.Semaphore(concurrency)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(
        base_url=f"http://127.0.0.1:{gport}", timeout=120, limits=limits
    ) as client:

        async def one(i: int) -> None:
            nonlocal errors
            body = {**group, "question_id": f"bench-{i % 25}"}
            async with gate:
                response = await client.post("/v1/stagewise/score", json=body)
            if response.status_code != 200:
                errors += 1
                return
            timing = response.json()["timing"]
            overheads.append(timing["overhead_s"] * 1000)
            totals.append(timing["total_s"] * 1000)

        await asyncio.gather(*(one(i) for i in range(20)))  # warm-up
        overheads.clear()
        totals.clear()
        t0 = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(requests)))
        elapsed = time.perf_counter() - t0
    gateway.kill()
    upstreams.kill()
    if not overheads:
        print(f"all {errors} requests failed")
        return
    print(f"throughput                   {len(overheads) / elapsed:8.1f} req/s")
    print(f"errors                       {errors:8d}")
    print(f"request latency p50 / p99    {pct(totals, 0.5):8.1f} / {pct(totals, 0.99):.1f} ms")
    print(f"gateway overhead mean        {statistics.fmean(overheads):8.2f} ms")
    print(f"gateway overhead p50         {pct(overheads, 0.5):8.2f} ms")
    print(f"gateway overhead p99         {pct(overheads, 0.99):8.2f} ms   (target < 5 ms)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--skip-model", action="store_true", help="skip the real-model part")
    parser.add_argument("--rollouts", type=int, default=8)
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--concurrency", type=int, default=50)
    args = parser.parse_args()
    if not args.skip_model:
        asyncio.run(model_group(args.rollouts))
    asyncio.run(
        gateway_overhead(
            requests=args.requests, concurrency=args.concurrency, rollouts=args.rollouts
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
