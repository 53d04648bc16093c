"""`rubricate eval grounding`: what the grounded-support check costs on labelled dev data.

No model runs. The verifier's raw label probabilities for every (answer, nugget) pair were
stored by `rubricate eval calibrate` (the shipped features file next to the calibration);
the labels are the calibration's out-of-fold predictions (5 folds by whole topic, as the
shipped calibration's cross-validated figures), so a pair is never labelled by a model
fitted on its own topic. The grounding rule (`nuggets.domain.grounding`) is then applied to
each label with the pair's answer as the block (the dev answers are judged as one block, as
when the features were collected), and the metrics before and after are compared, for the
shipped rule and for every rule of a grid. `--choose` picks the strictest rule of the grid
whose fall in macro-F1 and in supported-vs-not F1 stays within `--max-fall`.
"""

import argparse
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rubricate.evaluation.calibrate_run import load_samples
from rubricate.evaluation.calibration import DEFAULT_L2, Sample, label_metrics, out_of_fold
from rubricate.evaluation.harness import write_report
from rubricate.evaluation.nuggets import load_records
from rubricate.nuggets.domain.grounding import CALIBRATED, GroundingRule, grounded_label
from rubricate_client.schemas.nuggets import Label

SHIPPED_FEATURES = (
    Path(__file__).resolve().parents[1]
    / "nuggets"
    / "verifier"
    / "calibrations"
    / "qwen2.5-coder-1.5b.features.jsonl"
)

GRID_SUPPORT = (0.0, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.75, 0.8, 0.9, 1.0)
GRID_PARTIAL = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5)


@dataclass(frozen=True)
class Pair:
    topic: str
    nugget: str
    answer: str
    gold: Label
    before: Label
    """The calibrated label, out of fold."""


def pairs(data: Path, features: Path, *, l2: float = DEFAULT_L2) -> list[Pair]:
    """Every stored (topic, nugget) sample with its answer and out-of-fold label."""
    records = {r.topic_id: r for r in load_records(data)}
    known = load_samples(features)
    keyed: list[tuple[str, Sample]] = [(key, s) for key, s in known.items() if s.topic in records]
    if not keyed:
        raise ValueError(f"no sample of {features} belongs to a topic of {data}")
    predicted = out_of_fold([s for _, s in keyed], l2=l2)
    return [
        Pair(
            topic=s.topic,
            nugget=key.split("\t", 1)[1],
            answer=records[s.topic].answer,
            gold=s.gold,
            before=label,
        )
        for (key, s), (label, _) in zip(keyed, predicted, strict=True)
    ]


def after(ps: Sequence[Pair], rule: GroundingRule) -> list[Label]:
    return [grounded_label(p.before, p.nugget, p.answer, mode="long", rule=rule) for p in ps]


def evaluate(ps: Sequence[Pair], rule: GroundingRule) -> dict[str, Any]:
    gold = [p.gold for p in ps]
    before = label_metrics(gold, [p.before for p in ps])
    grounded = after(ps, rule)
    out = label_metrics(gold, grounded)
    changed = sum(1 for p, g in zip(ps, grounded, strict=True) if g != p.before)
    return {
        "rule": asdict(rule),
        "before": before,
        "after": out,
        "fall_macro_f1": before["macro_f1"] - out["macro_f1"],
        "fall_supported_f1": before["supported_f1"] - out["supported_f1"],
        "lowered": changed,
    }


def grid(ps: Sequence[Pair]) -> list[dict[str, Any]]:
    out = []
    for s in GRID_SUPPORT:
        for p in GRID_PARTIAL:
            if p > s:
                continue
            for numbers in (False, True):
                out.append(
                    evaluate(ps, GroundingRule(support_min=s, partial_min=p, numbers=numbers))
                )
    return out


def choose(rows: Sequence[Mapping[str, Any]], *, max_fall: float) -> Mapping[str, Any] | None:
    """The strictest rule (highest support_min, then partial_min, numbers on) within the fall."""
    ok = [
        r
        for r in rows
        if r["fall_macro_f1"] <= max_fall + 1e-12 and r["fall_supported_f1"] <= max_fall + 1e-12
    ]
    if not ok:
        return None
    return max(
        ok,
        key=lambda r: (r["rule"]["support_min"], r["rule"]["partial_min"], r["rule"]["numbers"]),
    )


def format_row(row: Mapping[str, Any]) -> str:
    rule = row["rule"]
    b, a = row["before"], row["after"]
    return (
        f"support>={rule['support_min']:.2f} partial>={rule['partial_min']:.2f} "
        f"numbers={'on' if rule['numbers'] else 'off'}: macro-F1 {b['macro_f1']:.3f} -> "
        f"{a['macro_f1']:.3f} ({-row['fall_macro_f1']:+.3f}), supported-vs-not "
        f"{b['supported_f1']:.3f} -> {a['supported_f1']:.3f} ({-row['fall_supported_f1']:+.3f}), "
        f"accuracy {b['accuracy']:.3f} -> {a['accuracy']:.3f}, {row['lowered']} labels lowered"
    )


def eval_grounding(args: argparse.Namespace) -> int:
    try:
        ps = pairs(args.data, args.features)
    except (OSError, ValueError) as exc:
        print(f"rubricate eval grounding: {exc}", file=sys.stderr)
        return 2
    topics = len({p.topic for p in ps})
    print(f"{len(ps)} pairs, {topics} topics; labels: calibrated, out of fold (5 folds by topic)")
    shipped = evaluate(ps, CALIBRATED)
    print("shipped rule: " + format_row(shipped))
    rows = grid(ps)
    chosen = choose(rows, max_fall=args.max_fall)
    if args.choose:
        print(f"grid of {len(rows)} rules; strictest within a fall of {args.max_fall}:")
        print("  " + (format_row(chosen) if chosen else "none"))
    report = {
        "pairs": len(ps),
        "topics": topics,
        "shipped": shipped,
        "grid": rows,
        "chosen": chosen,
    }
    write_report(args.json_path, report)
    within = shipped["fall_macro_f1"] <= args.max_fall and shipped["fall_supported_f1"] <= (
        args.max_fall
    )
    return 0 if within else 1
