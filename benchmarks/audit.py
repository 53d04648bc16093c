"""Reward-audit benchmark. Prints figures; asserts nothing.

1. Trainer-facing latency of `POST /v1/stagewise/score` with the audit at 0%, 5% and 100% of
   groups (goal: no measurable change at 5%: the hand-over runs after the answer is built).
2. Audit throughput: audited groups per second once they are queued.

Every service runs in process (embedded mode, Celery eager, SQLite), with fake judges (they
judge nothing) that answer after `--judge-delay` seconds: the live judge behind the verifier
and the reference judge of the audit. Sequential requests, one question per fraction (its
first group is always audited).

    python benchmarks/audit.py [--requests 100] [--rollouts 8] [--judge-delay 0.01]
"""

import argparse
import asyncio
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from rubricate.audit.miner.repository import AuditRepository
from rubricate.audit.miner.runner import AuditRuntime
from rubricate.db.engine import make_engine
from rubricate.embedded import SERVICES, EmbeddedPlatform
from rubricate.gateway.settings import GatewaySettings
from rubricate.llm.server import TaskSettings
from rubricate.llm.settings import LLMSettings
from rubricate.miner import tasks
from rubricate.stagewise.verifier.service import StageScoringService
from rubricate.testing.fake_judge import FakeJudgeBackend

FRACTIONS = (0.0, 0.05, 1.0)


def trajectory(i: int) -> str:
    return (
        f"<think>scope {i}</think><structured_plan>plan {i}</structured_plan>"
        f'\n<call_tool name="search">q {i}</call_tool><tool_output>o</tool_output>'
        f"\n<think>check</think><review>gaps {i}</review>\n<answer>final answer {i}</answer>"
    )


def group(question: str, step: int, n: int) -> dict[str, Any]:
    return {
        "question": question,
        "step": step,
        "evolve": step == 0,
        "rollouts": [{"id": f"r{i}", "trajectory": trajectory(i)} for i in range(n)],
    }


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def audited(client: httpx.AsyncClient, question_id: str) -> list[dict[str, Any]]:
    response = await client.get(
        "/v1/audit/groups", params={"question_id": question_id, "limit": 1000}
    )
    audits: list[dict[str, Any]] = response.json()["audits"]
    return audits


async def run(args: argparse.Namespace) -> None:
    live = FakeJudgeBackend(delay_s=args.judge_delay)
    with tempfile.TemporaryDirectory() as tmp:
        platform = EmbeddedPlatform(
            data_dir=Path(tmp),
            ports=dict.fromkeys(SERVICES, 0),
            llm=LLMSettings(max_retries=0),
            backend=live,
            gateway=GatewaySettings(upstream_retries=0),
        )
        async with (
            platform,
            httpx.AsyncClient(base_url=platform.urls["gateway"], timeout=600) as client,
        ):
            engine = make_engine(f"sqlite:///{Path(tmp) / 'rubricate.db'}")
            reference = StageScoringService(
                backend=FakeJudgeBackend(delay_s=args.judge_delay),
                tasks=TaskSettings(scoring_design="generate"),
                llm=LLMSettings(max_retries=0),
            )
            tasks.configure_audit_runtime(
                AuditRuntime(
                    repo=AuditRepository(engine), judge=reference, model="fake", design="generate"
                )
            )
            print(
                f"== /v1/stagewise/score, {args.requests} sequential requests of "
                f"{args.rollouts} rollouts, fake judges at {args.judge_delay * 1000:.0f} ms ==",
                flush=True,
            )
            print(
                f"{'audit':>6} {'p50 ms':>8} {'p95 ms':>8} {'mean ms':>8} {'audited':>8} "
                f"{'audits/s':>9}"
            )
            try:
                for fraction in FRACTIONS:
                    await client.put("/v1/audit/settings", json={"fraction": fraction})
                    question = f"benchmark {fraction} {uuid.uuid4().hex}"
                    latencies = []
                    question_id = ""
                    queued_at = time.perf_counter()
                    for step in range(args.requests):
                        t0 = time.perf_counter()
                        response = await client.post(
                            "/v1/stagewise/score", json=group(question, step, args.rollouts)
                        )
                        latencies.append(time.perf_counter() - t0)
                        response.raise_for_status()
                        question_id = response.json()["question_id"]
                    while True:  # every sampled audit finished
                        found = await audited(client, question_id)
                        if all(a["status"] in ("done", "failed") for a in found):
                            break
                        await asyncio.sleep(0.05)
                    elapsed = time.perf_counter() - queued_at
                    print(
                        f"{fraction:>6.0%} {pct(latencies, 0.5) * 1000:8.1f} "
                        f"{pct(latencies, 0.95) * 1000:8.1f} "
                        f"{statistics.fmean(latencies) * 1000:8.1f} {len(found):8d} "
                        f"{len(found) / elapsed:9.1f}",
                        flush=True,
                    )
            finally:
                tasks.configure_audit_runtime(None)
                engine.dispose()
    print(
        "audits/s counts from the first request to the last audit done, so at low fractions it"
        " is bounded by the request rate, not by the audit."
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument("--rollouts", type=int, default=8)
    parser.add_argument("--judge-delay", type=float, default=0.01)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
