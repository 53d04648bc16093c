"""Runs `rubricate eval nuggets` against a gateway: a running one or an embedded platform."""

import argparse
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from rubricate.evaluation.harness import platform_llm, write_report
from rubricate.evaluation.lexical import calibrate, lexical_predictions, prior_predictions
from rubricate.evaluation.nuggets import (
    Record,
    RecordRun,
    RunConfig,
    format_report,
    load_records,
    run_records,
    select,
    summarize,
)
from rubricate.evaluation.target import gateway_client
from rubricate.nuggets.domain.lexical import PRIOR_RULES

if TYPE_CHECKING:
    from rubricate.llm.settings import LLMSettings


async def eval_nuggets(args: argparse.Namespace) -> int:
    try:
        records = load_records(args.data)
    except (OSError, ValueError) as exc:
        print(f"rubricate eval nuggets: {exc}", file=sys.stderr)
        return 2
    chosen = select(records, limit=args.limit, per_topic=args.per_topic, seed=args.seed)
    pairs = sum(len(r.nuggets) for r in chosen)
    print(f"{len(chosen)} topics, {pairs} (answer, nugget) pairs from {args.data}", flush=True)
    config = RunConfig(
        batch_size=args.batch_size,
        label_probabilities=args.probabilities,
        concurrency=args.concurrency,
        extra={"data": str(args.data), "limit": args.limit, "seed": args.seed},
    )
    chosen_topics = {r.topic_id for r in chosen}
    rest = [r for r in records if r.topic_id not in chosen_topics]
    if args.judge == "lexical":
        return _report(lexical_only(chosen, rest, config), args)
    llm = _platform_llm(args, config, chosen_topics)
    async with gateway_client(args.gateway, llm, timeout_s=config.timeout_s) as client:
        started = time.perf_counter()
        runs = await run_records(client, chosen, config)
        wall = time.perf_counter() - started
    summary = summarize(runs, wall_s=wall, config=config)
    if rest:
        summary["variants"] = variants(chosen, rest, runs)
    return _report(summary, args)


def _platform_llm(
    args: argparse.Namespace, config: RunConfig, chosen_topics: set[str]
) -> "LLMSettings | None":
    """The embedded platform's LLM settings (None with `--gateway`), recorded in the report's
    configuration; with the embedded model's label calibration, also which evaluated topics
    it was fitted on (a warning when any: the figures are in-sample)."""
    if args.gateway:
        return platform_llm(args.gateway, args.backend, config.extra)
    from rubricate.nuggets.verifier.service import NuggetTaskSettings, load_calibration

    task = NuggetTaskSettings()
    logprobs = args.probabilities and task.design == "generate"
    fixed = {"embedded_logprobs": True} if logprobs else {}
    llm = platform_llm(None, args.backend, config.extra, **fixed)
    assert llm is not None
    if llm.backend != "embedded" or task.design == "generate":
        return llm
    calibration = load_calibration(task.calibration, model=config.extra["model"])
    if calibration is not None:
        inside = sorted(chosen_topics & set(calibration.topics))
        config.extra["calibration"] = {
            "model": calibration.model,
            "fitted_on": calibration.fitted_on,
            "evaluated_topics_in_its_fitting_data": inside,
        }
        if inside:
            print(
                f"warning: {len(inside)} of the {len(chosen_topics)} evaluated topics "
                "were in the calibration's fitting data: figures are in-sample",
                file=sys.stderr,
            )
    return llm


def _report(summary: dict[str, Any], args: argparse.Namespace) -> int:
    print(format_report(summary))
    for name, v in summary.get("variants", {}).items():
        print(
            f"variant {name}: accuracy {v['accuracy']:.3f}  macro-F1 {v['macro_f1']:.3f}  "
            f"supported-vs-not {v['supported_vs_not_macro_f1']:.3f}  kappa {v['kappa']:.3f}"
        )
    write_report(args.json_path, summary)
    return 0 if summary["pairs_judged"] else 1


def lexical_only(
    chosen: Sequence[Record], rest: Sequence[Record], config: RunConfig
) -> dict[str, Any]:
    """The overlap judge on the slice, thresholds fitted on the other topics."""
    started = time.perf_counter()
    th = calibrate(rest or chosen)
    predicted = lexical_predictions(chosen, th)
    runs = [RecordRun(record=r, predicted=p) for r, p in zip(chosen, predicted, strict=True)]
    config.extra.update(
        judge="lexical",
        thresholds={"support": th.support, "partial": th.partial},
        calibrated_on="other topics" if rest else "the slice itself (no other topics)",
    )
    return summarize(runs, wall_s=time.perf_counter() - started, config=config)


def variants(
    chosen: Sequence[Record], rest: Sequence[Record], runs: Sequence[RecordRun]
) -> dict[str, dict[str, Any]]:
    """The same pairs judged by the overlap rule alone and by the model with the overlap
    prior (thresholds fitted on the other topics of the file): free comparisons."""
    th = calibrate(rest)
    thresholds = {"support": th.support, "partial": th.partial}
    lexical = [
        replace(run, predicted=p)
        for run, p in zip(runs, lexical_predictions(chosen, th), strict=True)
    ]
    named = [("lexical_only", lexical)]
    for rule in PRIOR_RULES:
        prior = prior_predictions(chosen, [r.predicted for r in runs], th, rule=rule)
        named.append(
            (
                f"model_with_lexical_prior_{rule}",
                [replace(run, predicted=p) for run, p in zip(runs, prior, strict=True)],
            )
        )
    out: dict[str, dict[str, Any]] = {}
    for name, vruns in named:
        s = summarize(vruns, wall_s=0.0, config=RunConfig())
        out[name] = {
            "thresholds": thresholds,
            "accuracy": s["accuracy"],
            "macro_f1": s["macro_f1"],
            "supported_vs_not_macro_f1": s["supported_vs_not"]["macro_f1"],
            "kappa": s["kappa"],
            "per_label": s["per_label"],
            "confusion": s["confusion"],
        }
    return out
