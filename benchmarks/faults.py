"""The fault matrix (issue 33): one RL step with each infrastructure fault in turn, on the
production shape `benchmarks/rl_step.py` starts (separate processes, Redis with an
append-only file, API keys, the judge simulator), against a clean run of the same step.

Each run is a fresh tenant sending the same step (`--size` rollouts, `--pattern`: OpenRLHF's
client policy by default, 5 tries 1 s apart). `--at` seconds into the step the fault is
injected:

- `<service>-kill`: SIGKILL, then started again at once (gateway, store, verifier,
  generator);
- `<service>-term`: SIGTERM (the graceful drain), started again once it has exited (the
  gateway, the only replica here, serves the step on until it is idle, then exits);
- `redis-restart`: Redis SIGKILLed and started again at once (its append-only file keeps
  the data); `redis-outage`: the same, down for `--outage-s` (30) seconds;
- `postgres-restart`: the benchmark's own PostgreSQL (a private cluster on a free port, started
  for this fault list; `rl_step.start_postgres`) SIGKILLed and started again at once (crash
  recovery from its write-ahead log);
- `judge-503`, `judge-429`: the judge answers that status for `--judge-fault-s` (20) s;
  `judge-slow`: ten times slower for as long;
- `rolling`: every service in turn (store, verifier, generator, gateway) SIGTERMed, started
  again and waited for, as a rolling upgrade with one replica each would;
- `gateway-lost`: the step goes through the balancer (`rl_balancer.py`) in front of two
  gateway replicas sharing Redis, and the second replica is SIGKILLed and not started again
  (the balancer skips it; its groups are taken over by the other once its lease lapses).

Per fault it prints: answered, errors after the client's retries (by final status), partial
groups, rewards equal to the clean run's (per sample), judge calls beyond the clean run's,
and wall time against the clean run. With `postgres-restart` in the list every run of the
list, the clean one included, uses the private PostgreSQL; otherwise the machine's server.

    nice -n 10 python benchmarks/faults.py --size 1024 --faults all --json faults.json
"""

import argparse
import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

import rl_step as rs

SERVICES = {"gateway": "gateway", "store": "store", "verifier": "verifier"}
SERVICES["generator"] = "rubric-generator"
FAULTS = [
    "none",
    *(f"{s}-{how}" for s in SERVICES for how in ("kill", "term")),
    "redis-restart",
    "redis-outage",
    "postgres-restart",
    "judge-503",
    "judge-429",
    "judge-slow",
    "rolling",
    "gateway-lost",
]
REPLICA_FAULTS = {"gateway-lost"}
"""Faults whose step goes through the balancer to two gateway replicas."""


def _signal(proc: rs.Proc, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.popen.pid, sig)


async def _exited(proc: rs.Proc, limit_s: float) -> None:
    with contextlib.suppress(subprocess.TimeoutExpired):
        await asyncio.to_thread(proc.popen.wait, limit_s)
    if proc.alive():
        _signal(proc, signal.SIGKILL)
        await asyncio.to_thread(proc.popen.wait, 10)


async def _ready(client: httpx.AsyncClient, proc: rs.Proc, limit_s: float) -> None:
    path = "/readyz" if proc.name.startswith("gateway") else "/healthz"
    await rs.wait_ready(client, proc, path, limit_s)


async def restart(
    plat: rs.Platform, name: str, *, graceful: bool, down_s: float = 0.0, wait: bool = False
) -> float:
    """Stop `name` (SIGTERM and wait for its drain, or SIGKILL), keep it down `down_s`,
    start it again; returns the seconds until it answers again (`wait`) or until started."""
    proc = plat.procs[name]
    began = time.monotonic()
    _signal(proc, signal.SIGTERM if graceful else signal.SIGKILL)
    await _exited(proc, 300.0 if graceful else 10.0)
    if down_s:
        await asyncio.sleep(down_s)
    proc.restart()
    if wait and proc.url is not None:
        async with httpx.AsyncClient() as client:
            await _ready(client, proc, 180.0)
    return time.monotonic() - began


async def inject(fault: str, plat: rs.Platform, args: argparse.Namespace) -> str:
    """Apply `fault` `--at` seconds into the step; a line saying what was done."""
    await asyncio.sleep(args.at)
    if fault == "none":
        return "no fault"
    service, _, how = fault.partition("-")
    if service in SERVICES and how in ("kill", "term"):
        took = await restart(plat, SERVICES[service], graceful=how == "term")
        sent = "SIGTERM" if how == "term" else "SIGKILL"
        return f"{SERVICES[service]} {sent}, restarted after {took:.1f} s"
    if fault == "redis-restart":
        took = await restart(plat, "redis", graceful=False)
        return f"redis SIGKILL, restarted after {took:.1f} s"
    if fault == "redis-outage":
        took = await restart(plat, "redis", graceful=False, down_s=args.outage_s)
        return f"redis SIGKILL, down {args.outage_s:g} s, restarted after {took:.1f} s"
    if fault == "postgres-restart":
        took = await restart(plat, "postgres", graceful=False)
        return f"postgres SIGKILL, restarted after {took:.1f} s"
    if fault.startswith("judge-"):
        spec: dict[str, Any] = {"for_s": args.judge_fault_s}
        if fault == "judge-slow":
            spec["slowdown"] = 10.0
        else:
            spec["status"] = int(fault.removeprefix("judge-"))
        await post_fault(plat.sim_url, spec)
        return f"judge {json.dumps(spec)}"
    if fault == "gateway-lost":
        _signal(plat.procs["gateway-2"], signal.SIGKILL)
        await _exited(plat.procs["gateway-2"], 10.0)
        return "gateway-2 of 2 SIGKILLed, not restarted (the balancer skips it)"
    if fault == "rolling":
        steps = []
        for name in ("store", "verifier", "rubric-generator", "gateway"):
            took = await restart(plat, name, graceful=True, wait=True)
            steps.append(f"{name} {took:.1f} s")
        return "rolling SIGTERM + restart, each ready before the next: " + ", ".join(steps)
    raise SystemExit(f"unknown fault {fault!r}")


async def post_fault(sim_url: str, spec: dict[str, Any], *, tries: int = 10) -> None:
    """Tell the judge simulator to misbehave. On a loaded machine its accept queue can be
    full (the step's own calls): a connect timeout or a dropped connection is tried again,
    1 s apart, with a timeout per try (before: httpx's 5 s default and no retry crashed the
    matrix at 4,096 rollouts)."""
    timeout = httpx.Timeout(30.0, connect=10.0)
    async with httpx.AsyncClient(timeout=timeout) as client:
        for attempt in range(tries):
            try:
                (await client.post(f"{sim_url}/sim/fault", json=spec)).raise_for_status()
                return
            except httpx.TransportError:
                if attempt == tries - 1:
                    raise
                await asyncio.sleep(1.0)


async def heal(plat: rs.Platform, args: argparse.Namespace) -> None:
    """Every process up and ready before the next run."""
    async with httpx.AsyncClient() as client:
        for proc in plat.procs.values():
            if not proc.alive():
                proc.restart()
            if proc.url is not None and proc.name != "sim":
                await _ready(client, proc, args.start_timeout)


def judge_calls(r: rs.RunResult) -> int:
    return sum(r.judge_requests.values())


async def main(args: argparse.Namespace) -> list[dict[str, Any]]:
    faults = (
        FAULTS if args.faults == ["all"] else ["none", *[f for f in args.faults if f != "none"]]
    )
    tenants = [f"fault-{f}" for f in faults]
    samples = rs.make_step(args.size, args.group_size, args.trajectory_chars)
    if REPLICA_FAULTS & set(faults):  # a second gateway replica and the balancer
        args.patterns = [args.pattern, "replicas"]
    args.private_postgres = "postgres-restart" in faults  # a server this run may restart
    rows: list[dict[str, Any]] = []
    clean: rs.RunResult | None = None
    async with rs.platform(args, tenants) as plat:
        print(f"services from {rs.source_description(args.source)}; {os.cpu_count()} CPUs")
        for fault in faults:
            direct = plat.gateway_url
            if fault in REPLICA_FAULTS:  # the step through the balancer, as a trainer would
                assert plat.balancer_url is not None
                plat.gateway_url = plat.balancer_url
            injected = asyncio.create_task(inject(fault, plat, args))
            try:
                result = await rs.measure(args.pattern, plat, f"fault-{fault}", samples, args)
            finally:
                plat.gateway_url = direct
            what = await injected
            if clean is None:
                clean = result
            reference = {k: v for k, v in clean.rewards.items() if v is not None}
            result.compare(reference)
            row = {
                "fault": fault,
                "injected": what,
                "answered": result.ok,
                "size": result.size,
                "errors": result.errors,
                "attempts": result.attempts,
                "partial_groups": result.partial_groups,
                "groups": result.groups,
                "rewards_equal": result.rewards_equal,
                "rewards_differ": result.rewards_differ,
                "rewards_null": result.reward_missing,
                "judge_calls": judge_calls(result),
                "judge_calls_beyond_clean": judge_calls(result) - judge_calls(clean),
                "wall_s": round(result.wall_s, 1),
                "wall_vs_clean": round(result.wall_s / clean.wall_s, 2),
                "platform_cpu_ms_per_rollout": round(result.platform_cpu_ms, 1),
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
            await heal(plat, args)
            await asyncio.sleep(args.pause)
    print(
        "\n| fault | injected | answered | errors after retries | partial groups | "
        "rewards = clean | judge calls beyond clean | wall s (x clean) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        errors = ", ".join(f"{v}× {k}" for k, v in sorted(r["errors"].items())) or "0"
        print(
            f"| {r['fault']} | {r['injected']} | {r['answered']}/{r['size']} | {errors} | "
            f"{r['partial_groups']}/{r['groups']} | {r['rewards_equal']}/{r['answered']} | "
            f"{r['judge_calls_beyond_clean']:+d} | {r['wall_s']} ({r['wall_vs_clean']}x) |"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))  # noqa: ASYNC240
    return rows


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--pattern", default="openrlhf", choices=("openrlhf", "verl", "trl"))
    parser.add_argument(
        "--faults", default="all", type=lambda v: v.split(","), help=f"all or some of {FAULTS}"
    )
    parser.add_argument("--at", type=float, default=5.0, help="s into the step")
    parser.add_argument("--outage-s", type=float, default=30.0)
    parser.add_argument("--judge-fault-s", type=float, default=20.0)
    parser.add_argument("--group-size", type=int, default=16)
    parser.add_argument("--trajectory-chars", type=int, default=3000)
    parser.add_argument("--fleet", type=int, default=1)
    parser.add_argument("--max-batch", type=int, default=256)
    parser.add_argument("--call-s", type=float, default=0.02)
    parser.add_argument("--prefill-ms", type=float, default=0.05)
    parser.add_argument("--decode-ms", type=float, default=5.0)
    parser.add_argument("--env", action="append", default=[], help="NAME=VALUE for every service")
    parser.add_argument("--run-timeout", type=float, default=1200.0)
    parser.add_argument("--start-timeout", type=float, default=180.0)
    parser.add_argument("--pause", type=float, default=2.0)
    parser.add_argument("--source", default=None)
    parser.add_argument("--keep-logs", action="store_true")
    parser.add_argument(
        "--sdk-retry-for-s",
        type=float,
        default=rs.SDK_RETRY_FOR_S,
        help="the SDK patterns' retry window beyond 3 retries (0: 3 retries only, the SDK "
        "before issue 33's fix)",
    )
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    # what rl_step's platform and measurements read
    args.prefill_s, args.decode_s = args.prefill_ms / 1000, args.decode_ms / 1000
    args.patterns = [args.pattern]
    args.miner = False
    args.redis_aof = True
    args.sim_max_queue = None
    args.client = "lean"
    args.settle_s = 0.0
    args.verl_window = 10.0
    rs.SDK_RETRY_FOR_S = args.sdk_retry_for_s
    args.trl_ranks = 8
    if args.source:
        args.source = str(Path(args.source).resolve())
    return args


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    asyncio.run(main(parse_args()))
