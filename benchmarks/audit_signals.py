"""The audit's signal refresh in a run's steady state. Prints figures; asserts nothing.

The miner refreshes its signal gauges every 30 s (`AuditService.publish_signals`). Before
2026-11-29 a refresh read every record of each tenant's latest `signal_steps` training steps
(50 by default) and recomputed everything from them: in a run of 4,096 rollouts a step, that
is 50 x 256 groups on every refresh, growing with the step. Now a step's part of the signals
is kept with a fingerprint of its records, and a refresh reads again only the steps whose
records changed (the step in progress, the steps whose audits finished).

This fills a fresh PostgreSQL database with `--steps` steps of `--groups` handed-over groups
(through `AuditRepository.submit`, as the miner records them; the first group of each new
question is audited up to the audit's share, and its audit is finished with a result), then
measures, side by side on the same records:

- `full read`: what a refresh cost before (`compute_signals` over `recent_steps`, the
  `GET /v1/audit/signals` path), per tenant;
- `refresh, one step changed`: the refresh itself (`publish_signals`: the expiry, the
  fingerprints and the gauges included) after a new step's groups arrived and their audits
  finished, with the parts of the earlier steps kept by the refresh before.

    python benchmarks/audit_signals.py [--steps 50] [--groups 256] [--rollouts 16] [--repeat 5]

Needs PostgreSQL at 127.0.0.1:5432 (a database of its own, created and dropped as
`rl_step.py` does).
"""

import argparse
import statistics
import time
import uuid
from collections.abc import Callable
from typing import Any

import rl_step
from rubricate.audit.miner.repository import AuditRepository
from rubricate.audit.miner.schemas import AuditSubmission
from rubricate.audit.miner.service import (
    AuditService,
    compute_signals,
    summarize,
)
from rubricate.audit.settings import AuditSettings
from rubricate.db.engine import make_engine
from rubricate.db.migrate import upgrade_to_head

STAGES = ("plan", "research", "review", "answer")


class NoQueue:
    """Audits are finished here directly; nothing is queued."""

    def submit(self, tenant: str, scoring_id: str) -> None:
        return None

    def replay(self, job_id: str) -> None:
        return None

    async def aclose(self) -> None:
        return None


def submission(step: int, question: int, rollouts: int) -> AuditSubmission:
    text = " ".join(f"word{k}" for k in range(120))
    trajectory = "".join(f"<{s}>{text}</{s}>" for s in STAGES)
    spans: dict[str, tuple[int, int] | None] = {}
    at = 0
    for s in STAGES:
        start = at + len(s) + 2
        spans[s] = (start, start + len(text))
        at = start + len(text) + len(s) + 3
    rubrics = [
        {
            "id": f"r{i}",
            "stage": STAGES[i % 4],
            "origin": "active",
            "title": f"Rubric {i}",
            "description": "Names the unit mismatch between the two teams",
            "weight": 1.0,
            "polarity": "positive",
        }
        for i in range(11)
    ]
    judgments = [
        {"rubric_id": r["id"], "stage": r["stage"], "score": 1, "expected_score": 1.2}
        for r in rubrics
    ]
    return AuditSubmission.model_validate(
        {
            "scoring_id": f"sc_{uuid.uuid4().hex}",
            "question_id": f"q{question}",
            "question": "Why was the orbiter lost?",
            "step": step,
            "rubrics": rubrics,
            "rollouts": [
                {
                    "id": f"s{k}",
                    "trajectory": trajectory,
                    "spans": spans,
                    "scores": {s: 1.0 - 0.01 * k for s in STAGES},
                    "judgments": judgments,
                }
                for k in range(rollouts)
            ],
        }
    )


def result_of(sub: AuditSubmission) -> dict[str, Any]:
    return {
        "agreement": 0.9,
        "kendall_tau": 0.6,
        "best_changed": False,
        "rubrics": [
            {
                "rubric_id": r.id,
                "agreement": 0.9,
                "exact": 0.5,
                "live_mean": 1.2,
                "reference_mean": 1.1,
                "rollouts": len(sub.rollouts),
            }
            for r in sub.rubrics
        ],
    }


def record_step(
    service: AuditService, tenant: str, step: int, groups: int, rollouts: int
) -> list[str]:
    """Hand over one step's groups; the audited ones' scoring ids."""
    audited = []
    for g in range(groups):
        sub = submission(step, g, rollouts)
        status, _ = service.repo.submit(
            tenant,
            sub,
            summary=summarize(sub),
            default_fraction=service.settings.fraction,
            default_retention_days=0,
            max_share=service.settings.max_share,
        )
        if status == "pending":
            audited.append(sub.scoring_id)
    return audited


def finish(service: AuditService, tenant: str, scoring_ids: list[str], rollouts: int) -> None:
    sub = submission(0, 0, rollouts)
    for scoring_id in scoring_ids:
        service.repo.finish(tenant, scoring_id, result=result_of(sub), error=None)


def cpu_ms(work: Callable[[], object], repeat: int) -> tuple[float, float]:
    """Median and lowest process CPU of `work`, in ms."""
    times = []
    for _ in range(repeat):
        start = time.process_time()
        work()
        times.append((time.process_time() - start) * 1000)
    return statistics.median(times), min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--groups", type=int, default=256, help="groups handed over a step")
    parser.add_argument("--rollouts", type=int, default=16, help="rollouts a group")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    database = rl_step.create_database()
    url = f"postgresql://postgres@127.0.0.1:{rl_step.PG_PORT}/{database}"
    try:
        upgrade_to_head(url)
        settings = AuditSettings()
        service = AuditService(
            repo=AuditRepository(make_engine(url)), settings=settings, queue=NoQueue()
        )
        tenant = "bench"
        started = time.monotonic()
        pending: list[str] = []
        for step in range(args.steps):
            finish(service, tenant, pending, args.rollouts)
            pending = record_step(service, tenant, step, args.groups, args.rollouts)
            if step % 10 == 9 or step == args.steps - 1:
                print(f"  recorded {step + 1} steps ({time.monotonic() - started:.0f} s)")
        finish(service, tenant, pending, args.rollouts)
        window = min(args.steps, settings.signal_steps)
        records = window * args.groups

        def full() -> None:
            recent = service.repo.recent_steps(
                tenant, question_id=None, steps=settings.signal_steps
            )
            compute_signals(recent, question_id=None, settings=settings)

        full_med, full_min = cpu_ms(full, args.repeat)

        service.publish_signals()  # the parts a previous refresh kept
        changed = []
        for k in range(args.repeat):
            step = args.steps + k
            pending = record_step(service, tenant, step, args.groups, args.rollouts)
            finish(service, tenant, pending, args.rollouts)
            start = time.process_time()
            assert service.publish_signals()
            changed.append((time.process_time() - start) * 1000)
        inc_med, inc_min = statistics.median(changed), min(changed)

        print()
        print(
            f"signal window: {window} steps x {args.groups} groups of {args.rollouts} "
            f"rollouts = {records:,} records"
        )
        print("| refresh, per tenant | CPU ms (median) | lowest | per rollout of a step |")
        print("|---|---|---|---|")
        per = args.groups * args.rollouts
        print(f"| full read (before) | {full_med:.0f} | {full_min:.0f} | {full_med / per:.3f} ms |")
        print(
            f"| one step changed (now) | {inc_med:.0f} | {inc_min:.0f} | {inc_med / per:.3f} ms |"
        )
        print(f"ratio: {full_med / inc_med:.1f}x")
        print("(per rollout: one refresh per step, as at a step every 30 s or so)")
    finally:
        rl_step.drop_database(database)


if __name__ == "__main__":
    main()
