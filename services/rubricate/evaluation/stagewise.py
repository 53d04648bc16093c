"""`rubricate eval stagewise`: how often the stagewise judge ranks a trajectory above the
worse versions derived from it.

Input: JSON lines of stagewise cases (`case_to_json`; the shipped set is
`rubricate/examples/stagewise_eval.jsonl`, built by `build_stagewise_set`). For every
selected case the original and its degraded versions (`degrade.derive`) are sent as ONE
rollout group to `POST /v1/stagewise/score`, on a running gateway or on an embedded
platform started for the run. For each kind of damage and each stage score R (plan,
research, review, answer) and their sum (total), the report counts the groups where the
original scored higher, equal (ties, apart) or lower than the degraded version, and the
pairs that could not be compared (a rollout unscored or scored answer-only, a stage with
no rubric, a failed request): a failure is never counted as a ranking.
"""

import argparse
import json
import random
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

import httpx

from rubricate.evaluation.degrade import (
    KINDS,
    Case,
    Kind,
    Sentence,
    ToolCall,
    Variant,
    VitalFact,
    derive,
    render,
)
from rubricate.evaluation.harness import platform_llm, write_report
from rubricate.evaluation.target import PostedRun, gateway_client, post_all
from rubricate_client.constants import STAGES
from rubricate_client.endpoints import STAGEWISE_SCORE

Outcome = Literal["original_higher", "tie", "degraded_higher", "not_compared"]
OUTCOMES: Final[tuple[Outcome, ...]] = ("original_higher", "tie", "degraded_higher", "not_compared")
COLUMNS: Final[tuple[str, ...]] = (*STAGES, "total")
"""Per stage R, and their sum."""
TIE_EPS: Final = 1e-9
ORIGINAL_ID: Final = "original"


def case_to_json(case: Case) -> dict[str, Any]:
    return {
        "topic_id": case.topic_id,
        "question": case.question,
        "plan": case.plan,
        "research": None
        if case.research is None
        else [{"query": c.query, "output": c.output} for c in case.research],
        "review": case.review,
        "answer": [{"text": s.text, "cites": list(s.cites)} for s in case.answer],
        "vital": [{"nugget": v.nugget, "sentence": v.sentence} for v in case.vital],
    }


def case_from_json(raw: Mapping[str, Any]) -> Case:
    research = raw.get("research")
    answer = tuple(
        Sentence(str(s["text"]), tuple(int(k) for k in s.get("cites", ()))) for s in raw["answer"]
    )
    if not answer:
        raise ValueError("empty answer")
    vital = tuple(
        VitalFact(nugget=str(v["nugget"]), sentence=int(v["sentence"]))
        for v in raw.get("vital", ())
    )
    for v in vital:
        if not 0 <= v.sentence < len(answer):
            raise ValueError(f"vital sentence {v.sentence} outside the answer")
    return Case(
        topic_id=str(raw["topic_id"]),
        question=str(raw["question"]),
        plan=None if raw.get("plan") is None else str(raw["plan"]),
        research=None
        if research is None
        else tuple(ToolCall(str(c["query"]), str(c["output"])) for c in research),
        review=None if raw.get("review") is None else str(raw["review"]),
        answer=answer,
        vital=vital,
    )


def load_cases(path: Path) -> list[Case]:
    """Cases of a JSON-lines file; an invalid line raises ValueError naming it."""
    out: list[Case] = []
    with path.open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                out.append(case_from_json(json.loads(line)))
            except (KeyError, TypeError, ValueError) as exc:
                raise ValueError(f"{path}:{n}: not a stagewise case ({exc})") from exc
    return out


def select(cases: Sequence[Case], *, limit: int | None, seed: int) -> list[Case]:
    order = list(cases)
    random.Random(seed).shuffle(order)
    return order if limit is None else order[:limit]


@dataclass
class GroupRun(PostedRun):
    case: Case
    variants: list[Variant]
    scores: dict[str, dict[str, float | None] | None] = field(default_factory=dict)
    """Rollout id -> stage scores R (None: unscored)."""
    answer_only: set[str] = field(default_factory=set)
    """Rollouts scored by the answer-only fallback (their other stages are not judged)."""
    unscored_stages: list[str] = field(default_factory=list)


@dataclass
class StagewiseConfig:
    kinds: tuple[Kind, ...] = KINDS
    seed: int = 0
    concurrency: int = 1
    nugget_rubrics: bool = False
    """Send each vital nugget as a persistent answer rubric."""
    timeout_s: float = 3600.0
    extra: dict[str, Any] = field(default_factory=dict)


def group_request(
    case: Case, variants: Sequence[Variant], *, nugget_rubrics: bool
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "question": case.question,
        "rollouts": [{"id": ORIGINAL_ID, "trajectory": render(case)}]
        + [{"id": v.kind, "trajectory": render(v.case)} for v in variants],
    }
    if nugget_rubrics:
        body["persistent_rubrics"] = [
            {
                "title": v.nugget[:300],
                "description": f"The answer states this fact: {v.nugget}",
                "weight": 3,
            }
            for v in case.vital
        ]
    return body


async def run_groups(
    client: httpx.AsyncClient,
    cases: Sequence[Case],
    config: StagewiseConfig,
    *,
    others: Sequence[Case],
    progress: bool = True,
) -> list[GroupRun]:
    """Each case and its degraded versions scored as one group (`group_request`), the
    stage scores read from the response."""
    requests = []
    for case in cases:
        variants = derive(case, others=others, seed=config.seed, kinds=config.kinds)
        body = group_request(case, variants, nugget_rubrics=config.nugget_rubrics)
        requests.append((GroupRun(case=case, variants=variants), body))

    def done(n: int, run: GroupRun) -> None:
        what = f"{run.case.topic_id} {1 + len(run.variants)} rollouts"
        print(run.progress_line(n, len(cases), what), flush=True)
        if run.error is None:
            print("  " + _score_line(run), flush=True)

    return await post_all(
        client,
        STAGEWISE_SCORE,
        requests,
        concurrency=config.concurrency,
        read=_read_response,
        done=done if progress else None,
    )


def _score_line(run: GroupRun) -> str:
    """R per stage (plan/research/review/answer) of every rollout of the group."""
    cells = []
    for rollout_id in (ORIGINAL_ID, *(v.kind for v in run.variants)):
        scores = run.scores.get(rollout_id)
        shown = (
            "unscored"
            if scores is None
            else "/".join("-" if scores[s] is None else f"{scores[s]:.2f}" for s in STAGES)
        )
        flag = " answer-only" if rollout_id in run.answer_only else ""
        cells.append(f"{rollout_id} {shown}{flag}")
    return "R plan/research/review/answer: " + "; ".join(cells)


def _read_response(run: GroupRun, data: Mapping[str, Any]) -> None:
    run.unscored_stages = list(data.get("unscored_stages", []))
    for rollout in data["rollouts"]:
        fallback = rollout.get("fallback") or {}
        run.scores[rollout["id"]] = rollout.get("scores")
        if fallback.get("kind") == "answer_only":
            run.answer_only.add(rollout["id"])


def compare(run: GroupRun, rollout_id: str, column: str) -> Outcome:
    """Original against one degraded rollout on one column (a stage or `total`)."""
    if run.error is not None:
        return "not_compared"
    original, degraded = run.scores.get(ORIGINAL_ID), run.scores.get(rollout_id)
    if original is None or degraded is None:
        return "not_compared"
    stages = list(STAGES) if column == "total" else [column]
    if any(s in run.unscored_stages for s in stages):
        return "not_compared"
    if run.answer_only & {ORIGINAL_ID, rollout_id} and stages != ["answer"]:
        return "not_compared"
    a_values = [original[s] for s in stages]
    b_values = [degraded[s] for s in stages]
    if None in a_values or None in b_values:  # a stage the judge left unscored
        return "not_compared"
    a = sum(v for v in a_values if v is not None)
    b = sum(v for v in b_values if v is not None)
    if abs(a - b) <= TIE_EPS:
        return "tie"
    return "original_higher" if a > b else "degraded_higher"


def tally(runs: Sequence[GroupRun]) -> dict[str, dict[str, dict[str, Any]]]:
    """kind (and `all`) -> column -> counts of each outcome and the rates over compared."""
    counts: dict[str, dict[str, dict[str, int]]] = {}
    for run in runs:
        for variant in run.variants:
            for key in (variant.kind, "all"):
                per_kind = counts.setdefault(key, {c: dict.fromkeys(OUTCOMES, 0) for c in COLUMNS})
                for column in COLUMNS:
                    per_kind[column][compare(run, variant.kind, column)] += 1
    out: dict[str, dict[str, dict[str, Any]]] = {}
    ordered = [k for k in (*KINDS, "all") if k in counts]
    for kind in ordered:
        out[kind] = {}
        for column, c in counts[kind].items():
            compared = c["original_higher"] + c["tie"] + c["degraded_higher"]
            out[kind][column] = {
                **c,
                "compared": compared,
                "original_higher_rate": c["original_higher"] / compared if compared else None,
                "tie_rate": c["tie"] / compared if compared else None,
            }
    return out


def summarize(
    runs: Sequence[GroupRun], *, wall_s: float, config: StagewiseConfig
) -> dict[str, Any]:
    scored = [r for r in runs if r.error is None]
    return {
        "config": {
            "kinds": list(config.kinds),
            "seed": config.seed,
            "concurrency": config.concurrency,
            "nugget_rubrics": config.nugget_rubrics,
            **config.extra,
        },
        "groups": len(runs),
        "groups_scored": len(scored),
        "failed_groups": [{"topic_id": r.case.topic_id, "error": r.error} for r in runs if r.error],
        "sensitivity": tally(runs),
        "wall_s": wall_s,
        "seconds_per_group": wall_s / len(runs) if runs else 0.0,
        "tokens": sum(r.tokens for r in runs),
        "calls": sum(r.calls for r in runs),
        "details": [
            {
                "topic_id": r.case.topic_id,
                "error": r.error,
                "unscored_stages": r.unscored_stages,
                "original": r.scores.get(ORIGINAL_ID),
                "variants": [
                    {
                        "kind": v.kind,
                        "detail": v.detail,
                        "scores": r.scores.get(v.kind),
                        "answer_only": v.kind in r.answer_only,
                    }
                    for v in r.variants
                ],
            }
            for r in runs
        ],
    }


def format_report(summary: dict[str, Any]) -> str:
    s = summary
    lines = [
        f"groups {s['groups']}  scored {s['groups_scored']}  failed {len(s['failed_groups'])}",
        "original ranked above the degraded version: higher / tie / lower (not compared)",
        f"  {'damage':<20}" + "".join(f"{c:>18}" for c in COLUMNS),
    ]
    for kind, columns in s["sensitivity"].items():
        cells = []
        for column in COLUMNS:
            c = columns[column]
            cell = f"{c['original_higher']}/{c['tie']}/{c['degraded_higher']}"
            if c["not_compared"]:
                cell += f" ({c['not_compared']})"
            cells.append(f"{cell:>18}")
        lines.append(f"  {kind:<20}" + "".join(cells))
    lines.append(
        f"seconds per group {s['seconds_per_group']:.1f}  tokens {s['tokens']}  "
        f"calls {s['calls']}  wall {s['wall_s']:.1f} s"
    )
    return "\n".join(lines)


SHIPPED_SET: Final = Path(__file__).resolve().parent.parent / "examples" / "stagewise_eval.jsonl"
"""Real-text cases built from RAG24 answers by `build_stagewise_set`."""


async def eval_stagewise(args: argparse.Namespace) -> int:
    if args.data is None:
        args.data = SHIPPED_SET
    try:
        cases = load_cases(args.data)
    except (OSError, ValueError) as exc:
        print(f"rubricate eval stagewise: {exc}", file=sys.stderr)
        return 2
    chosen = select(cases, limit=args.limit, seed=args.seed)
    config = StagewiseConfig(
        kinds=tuple(args.kinds) if args.kinds else KINDS,
        seed=args.seed,
        concurrency=args.concurrency,
        nugget_rubrics=args.nugget_rubrics,
        extra={"data": str(args.data), "limit": args.limit},
    )
    print(f"{len(chosen)} trajectories from {args.data}", flush=True)
    llm = platform_llm(args.gateway, args.backend, config.extra)
    async with gateway_client(args.gateway, llm, timeout_s=config.timeout_s) as client:
        started = time.perf_counter()
        runs = await run_groups(client, chosen, config, others=cases)
        wall = time.perf_counter() - started
    summary = summarize(runs, wall_s=wall, config=config)
    print(format_report(summary))
    write_report(args.json_path, summary)
    return 0 if summary["groups_scored"] else 1
