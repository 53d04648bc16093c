"""Load test: many concurrent trainers against the gateway. Prints figures; asserts nothing.

Each simulated trainer sends `/v1/stagewise/score` groups for its own questions, with an
`Idempotency-Key` and the client's retry policy (429/5xx/timeouts, honouring Retry-After),
until the run time is up. The judge is the instant fake backend, so the figures are the
platform's own cost (gateway, store, database), not model time. Afterwards every accepted
request's buffer update is checked: the rubrics the response reported as new must be in the
question's buffer.

    python benchmarks/load.py [--trainers 32] [--seconds 20] [--rollouts 4]
        [--database-url postgresql://postgres@127.0.0.1:5432/postgres]  # default: SQLite
"""

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from rubricate.embedded import SERVICES, EmbeddedPlatform
from rubricate.gateway.settings import GatewaySettings
from rubricate.llm.settings import LLMSettings
from rubricate.store.settings import StoreSettings
from rubricate.testing.fake_judge import FakeJudgeBackend

TRAJECTORY = (
    "<think>scope {m}</think><structured_plan>plan {m}</structured_plan>"
    '\n<call_tool name="search">q {m}</call_tool><tool_output>o</tool_output>'
    "\n<think>audit</think><review>gaps {m}</review>\n<answer>final {m}</answer>"
)


@dataclass
class Tally:
    latencies: list[float] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)
    retries: int = 0
    accepted: list[tuple[str, str, list[str]]] = field(default_factory=list)
    """(tenant, question id, new rubric ids not pruned) of every 200."""


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


async def trainer(
    client: httpx.AsyncClient, *, n: int, rollouts: int, deadline: float, tally: Tally
) -> None:
    tenant = f"trainer-{n % 4}"
    step = 0
    while time.monotonic() < deadline:
        step += 1
        body = {
            "question": f"load question {n}-{step} {uuid.uuid4().hex[:6]}",
            "rollouts": [
                {
                    "id": f"r{i}",
                    "trajectory": TRAJECTORY.format(m="[[excellent]]" if i % 2 else "[[poor]]"),
                }
                for i in range(rollouts)
            ],
            "step": step,
        }
        headers = {"Idempotency-Key": uuid.uuid4().hex, "X-Rubricate-Tenant": tenant}
        started = time.perf_counter()
        for attempt in range(6):
            try:
                r = await client.post("/v1/stagewise/score", json=body, headers=headers)
            except httpx.HTTPError as exc:
                kind = type(exc).__name__
                if attempt == 5:
                    tally.errors[kind] = tally.errors.get(kind, 0) + 1
                    break
                tally.retries += 1
                await asyncio.sleep(0.05 * 2**attempt)
                continue
            if r.status_code in (429, 502, 503, 504) and attempt < 5:
                tally.retries += 1
                await asyncio.sleep(float(r.headers.get("retry-after", "0.1")))
                continue
            if r.status_code == 200:
                out = r.json()
                tally.latencies.append(time.perf_counter() - started)
                kept = set(out["generation"]["new_rubric_ids"]) - set(out["pruned"])
                tally.accepted.append((tenant, out["question_id"], sorted(kept)))
            else:
                key = f"HTTP {r.status_code}"
                tally.errors[key] = tally.errors.get(key, 0) + 1
            break


async def verify(client: httpx.AsyncClient, tally: Tally) -> tuple[int, int]:
    """(accepted requests whose buffer holds their new rubrics, those that do not)."""
    ok = missing = 0
    sem = asyncio.Semaphore(16)

    async def check(tenant: str, qid: str, new_ids: list[str]) -> None:
        nonlocal ok, missing
        async with sem:
            r = await client.get(f"/v1/buffers/{qid}", headers={"X-Rubricate-Tenant": tenant})
        if r.status_code != 200:
            missing += 1
            return
        present = {rubric["id"] for stage in r.json()["rubrics"].values() for rubric in stage}
        if set(new_ids) <= present:
            ok += 1
        else:
            missing += 1

    await asyncio.gather(*(check(*a) for a in tally.accepted))
    return ok, missing


async def run(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = None
        if args.database_url:
            store = StoreSettings(database_url=args.database_url, data_dir=Path(tmp))
        platform = EmbeddedPlatform(
            data_dir=Path(tmp),
            ports=dict.fromkeys(SERVICES, 0),
            llm=LLMSettings(cache="off"),
            backend=FakeJudgeBackend(),
            store=store,
            gateway=GatewaySettings(
                max_in_flight_per_tenant=args.per_tenant_limit, grpc_enabled=False
            ),
        )
        async with platform:
            limits = httpx.Limits(max_connections=args.trainers * 2)
            async with httpx.AsyncClient(
                base_url=platform.urls["gateway"], timeout=60, limits=limits
            ) as client:
                tally = Tally()
                t0 = time.monotonic()
                deadline = t0 + args.seconds
                await asyncio.gather(
                    *(
                        trainer(client, n=n, rollouts=args.rollouts, deadline=deadline, tally=tally)
                        for n in range(args.trainers)
                    )
                )
                wall = time.monotonic() - t0
                ok, missing = await verify(client, tally)
    lat = tally.latencies
    print(f"== load: {args.trainers} trainers, {args.seconds:.0f} s, {args.rollouts} rollouts ==")
    print(f"database                     {'PostgreSQL' if args.database_url else 'SQLite'}")
    print(f"accepted requests            {len(lat):8d}")
    print(f"throughput                   {len(lat) / wall:8.1f} req/s")
    print(f"latency p50                  {pct(lat, 0.5) * 1000:8.1f} ms")
    print(f"latency p99                  {pct(lat, 0.99) * 1000:8.1f} ms")
    if lat:
        print(f"latency mean                 {statistics.mean(lat) * 1000:8.1f} ms")
    print(f"client retries               {tally.retries:8d}")
    print(f"errors                       {sum(tally.errors.values()):8d} {tally.errors or ''}")
    print(f"buffer updates present       {ok:8d} / {len(tally.accepted)}")
    print(f"buffer updates MISSING       {missing:8d}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trainers", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--rollouts", type=int, default=4)
    parser.add_argument("--per-tenant-limit", type=int, default=64)
    parser.add_argument("--database-url", default=None, help="PostgreSQL; default SQLite")
    args: Any = parser.parse_args()
    asyncio.run(run(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
