"""`rubricate eval ...` subcommands (judge fidelity). Heavy imports happen when one runs.

`register` adds the `eval` command and one sub-command per harness, each built by its own
`_add_<harness>` function; the options several harnesses share (`--data`, `--limit`,
`--seed`, `--concurrency`, `--backend`, `--gateway`, `--json`) are written once below.
"""

import argparse
from collections.abc import Callable, Coroutine
from importlib import import_module
from pathlib import Path
from typing import Any, TypeAlias

Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"

_BACKEND_HELP = "LLM backend of the embedded platform (default: RUBRICATE_LLM_BACKEND)"


def register(subparsers: Subparsers) -> None:
    evaluate = subparsers.add_parser("eval", help="measure judge fidelity on labelled data")
    sub = evaluate.add_subparsers(dest="eval_command", required=True)
    _add_nuggets(sub)
    _add_calibrate(sub)
    _add_stagewise(sub)
    _add_grounding(sub)
    _add_injection(sub)
    _add_hacking(sub)


# --- options several harnesses share ---------------------------------------------------------


def _data(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", type=Path, required=True, help="labelled JSONL file")


def _limit(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--limit", type=int, default=None, help=f"at most this many {what}")


def _seed(parser: argparse.ArgumentParser, help: str) -> None:
    parser.add_argument("--seed", type=int, default=0, help=help)


def _concurrency(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--concurrency", type=int, default=1, help=f"{what} at once (default 1)")


def _backend(parser: argparse.ArgumentParser, help: str = _BACKEND_HELP) -> None:
    parser.add_argument(
        "--backend", choices=("embedded", "openai", "vllm"), default=None, help=help
    )


def _gateway(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--gateway", default=None, help="URL of a running gateway instead of an embedded one"
    )


def _json(parser: argparse.ArgumentParser, help: str = "write here") -> None:
    parser.add_argument("--json", type=Path, default=None, dest="json_path", help=help)


def _runs(module: str, function: str) -> Callable[[argparse.Namespace], int]:
    """The sub-command's handler: import `module` when it runs, then run its coroutine
    `function(args)` to completion."""

    def handler(args: argparse.Namespace) -> int:
        import asyncio

        run: Callable[[argparse.Namespace], Coroutine[Any, Any, int]]
        run = getattr(import_module(module), function)
        return asyncio.run(run(args))

    return handler


# --- one sub-command per harness -------------------------------------------------------------


def _add_nuggets(sub: Subparsers) -> None:
    nuggets = sub.add_parser(
        "nuggets",
        help="nugget verification against reference labels (RAG24-style JSONL)",
        description="Run the platform's nugget verification on every (answer, nugget) pair "
        "of a labelled JSONL file and report agreement with the reference labels.",
    )
    _data(nuggets)
    _limit(nuggets, "pairs")
    nuggets.add_argument("--per-topic", type=int, default=None, help="nuggets per topic")
    _seed(nuggets, "seed of the topic and nugget sample")
    _concurrency(nuggets, "records verified")
    nuggets.add_argument("--batch-size", type=int, default=None, help="nuggets per verifier call")
    _backend(nuggets)
    nuggets.add_argument(
        "--judge",
        choices=("platform", "lexical"),
        default="platform",
        help="platform: the nugget verifier; lexical: word-overlap baseline, no model",
    )
    _gateway(nuggets)
    nuggets.add_argument(
        "--probabilities",
        action="store_true",
        help="ask for label probabilities and report the soft reward (free in the choices "
        "design; the generate design on embedded loads the model with all logits)",
    )
    _json(nuggets)
    nuggets.set_defaults(func=_runs("rubricate.evaluation.runner", "eval_nuggets"))


def _add_calibrate(sub: Subparsers) -> None:
    calibrate = sub.add_parser(
        "calibrate",
        help="fit the nugget verifier's label calibration on labelled data",
        description="Read the verifier's raw label probabilities (choices design, embedded "
        "backend) on every selected (answer, nugget) pair, fit the multinomial calibration "
        "(features: the three label log-probabilities and the word overlap), print its "
        "cross-validated metrics (whole topics per fold) and write it as JSON, for "
        "RUBRICATE_NUGGET_TASK_CALIBRATION=FILE or verifier/calibrations/MODEL.json.",
    )
    _data(calibrate)
    calibrate.add_argument("--out", type=Path, required=True, help="calibration JSON to write")
    calibrate.add_argument(
        "--features",
        type=Path,
        default=None,
        help="per-pair features JSONL, reused and extended (default: OUT.features.jsonl)",
    )
    _limit(calibrate, "pairs")
    calibrate.add_argument("--per-topic", type=int, default=None, help="nuggets per topic")
    _seed(calibrate, "seed of the sample")
    calibrate.add_argument(
        "--exclude-topics",
        type=Path,
        default=None,
        help="file of topic ids (whitespace-separated) to leave out, e.g. an evaluation slice",
    )
    calibrate.add_argument("--l2", type=float, default=0.01, help="L2 penalty (default 0.01)")
    calibrate.set_defaults(func=_runs("rubricate.evaluation.calibrate_run", "eval_calibrate"))


def _add_stagewise(sub: Subparsers) -> None:
    from rubricate.evaluation.degrade import KINDS

    stagewise = sub.add_parser(
        "stagewise",
        help="sensitivity of the stagewise judge to damaged trajectories",
        description="Derive worse versions of each trajectory (a vital fact removed, a wrong "
        "fact inserted, citations stripped, the answer truncated, a stage deleted), score the "
        "original and its versions as one group through /v1/stagewise/score and report how "
        "often the original ranks higher, per stage R and in total, per kind of damage.",
    )
    stagewise.add_argument(
        "--data",
        type=Path,
        default=None,
        help="stagewise cases JSONL (default: the shipped rubricate/examples/stagewise_eval.jsonl)",
    )
    _limit(stagewise, "cases")
    _seed(stagewise, "seed of the sample and damage")
    _concurrency(stagewise, "groups scored")
    stagewise.add_argument(
        "--kinds", nargs="+", choices=KINDS, default=None, help="kinds of damage (default all)"
    )
    stagewise.add_argument(
        "--nugget-rubrics",
        action="store_true",
        help="send each vital nugget as a persistent answer rubric",
    )
    _backend(stagewise)
    _gateway(stagewise)
    _json(stagewise, "write the report here")
    stagewise.set_defaults(func=_runs("rubricate.evaluation.stagewise", "eval_stagewise"))


def _add_grounding(sub: Subparsers) -> None:
    grounding = sub.add_parser(
        "grounding",
        help="the grounded-support check's cost on labelled nugget data (no model)",
        description="Apply the nugget verifier's grounding rule to the calibrated labels of "
        "the stored (answer, nugget) features (out of fold, 5 folds by topic) and report "
        "macro-F1 and supported-vs-not F1 before and after, for the shipped rule and, with "
        "--choose, for a grid. Exit status 1 when the shipped rule costs more than --max-fall.",
    )
    _data(grounding)
    grounding.add_argument(
        "--features",
        type=Path,
        default=None,
        help="stored features (default: the shipped qwen2.5-coder-1.5b features)",
    )
    grounding.add_argument("--max-fall", type=float, default=0.01, help="allowed fall (0.01)")
    grounding.add_argument("--choose", action="store_true", help="also search the rule grid")
    _json(grounding)
    grounding.set_defaults(func=_eval_grounding)


def _add_injection(sub: Subparsers) -> None:
    from rubricate.evaluation.injection_judges import KINDS

    injection = sub.add_parser(
        "injection",
        help="prompt-injection resistance of every judge (stagewise, nuggets, steps, ...)",
        description="Score a clean wrong answer and the same answer with each prompt-"
        "injection attack appended (closing tags, fake system lines, chat-template tokens, "
        "score demands, a forged score sheet, other languages, ...) through the verifier's "
        "stagewise scoring, and print the mean rubric score of each and the delta attacked - "
        "clean per variant and design. With --judge, the same for the nugget (long and "
        "short form), step, reflection, listwise and rank judges: thirteen attacks each, "
        "eight without keyword markers (JSON blobs, a reviewer's remark, a grading policy, "
        "role-play, French, Chinese, split across blocks, a plain claim). Exit status 0: no "
        "attack raised the score; 1: some did; 2: some could not be scored.",
    )
    injection.add_argument(
        "--judge",
        choices=("stagewise", *KINDS, "all"),
        default="stagewise",
        help="the judge to attack (default stagewise; all = every judge but stagewise)",
    )
    injection.add_argument(
        "--defence",
        choices=("full", "grounding-only", "none"),
        default="full",
        help="nugget judges only, to measure each layer: full (as served), grounding-only "
        "(text addressing the judge is shown to it), none (shown, and no grounding check)",
    )
    injection.add_argument(
        "--fake-judge",
        action="store_true",
        help="judge with a fake that obeys every attack it sees (no model): what remains "
        "is the platform's own defence (not for stagewise)",
    )
    injection.add_argument(
        "--design",
        choices=("generate", "choices", "both"),
        default="both",
        help="stagewise scoring design (default both; choices needs the embedded backend)",
    )
    _limit(injection, "variants")
    injection.add_argument(
        "--variants", nargs="+", default=None, help="only these variants (default all)"
    )
    _backend(injection, "LLM backend (default: RUBRICATE_LLM_BACKEND)")
    _json(injection, "write the report here")
    injection.set_defaults(func=_eval_injection)


def _add_hacking(sub: Subparsers) -> None:
    from rubricate.evaluation.hacking import DEFAULT_PER_FAMILY, KINDS
    from rubricate.evaluation.hacking_families import FAMILIES

    hacking = sub.add_parser(
        "hacking",
        help="reward hacking: attack families generated from templates, on every judge",
        description="Generate attacks from templates filled with each base item's facts "
        "(meta-claims about the answer, answer-key echoes, master keys, hedged enumeration, "
        "negated restatement, keyword stuffing, verbosity, and the injection sets), put them "
        "on a wrong and an empty answer, and report per family, split (tuning / held-out "
        "templates) and judge the mean reward rise over the unattacked answer and the share "
        "of instances where it rose; the right answers' reward (what a defence costs); and "
        "whether every master key alone scores the floor. Exit status 0: no family raised a "
        "mean reward by more than 0.05 and every master key is at the floor; 1: otherwise; "
        "2: something could not be scored.",
    )
    hacking.add_argument(
        "--judge",
        default="all",
        help=f"comma-separated judges (default all): {','.join(KINDS)}",
    )
    hacking.add_argument(
        "--family",
        default="all",
        help=f"comma-separated families (default all): {','.join(FAMILIES)}",
    )
    hacking.add_argument(
        "--split",
        choices=("tuning", "held-out", "all"),
        default="all",
        help="templates of this split (default all: both, reported separately)",
    )
    hacking.add_argument(
        "--per-family",
        type=int,
        default=DEFAULT_PER_FAMILY,
        help=f"instances per family, judge and split (default {DEFAULT_PER_FAMILY})",
    )
    hacking.add_argument(
        "--items", type=int, default=None, help="only the first N base items (default all 10)"
    )
    hacking.add_argument(
        "--fake-judge",
        action="store_true",
        help="judge with a fake that obeys meta, echo, injection and master-key text and "
        "otherwise judges by word overlap (no model)",
    )
    hacking.add_argument(
        "--defence",
        choices=("full", "grounding-only", "none"),
        default="full",
        help="nugget judges only: full (as served), grounding-only, none",
    )
    hacking.add_argument(
        "--units",
        choices=("auto", "model", "cues", "off"),
        default=None,
        help="the assertion-unit reading of every service built here (default: the task "
        "settings', RUBRICATE_TASK_UNIT_READING); off = the defence switched off",
    )
    hacking.add_argument(
        "--reading",
        action="store_true",
        help="no judge: read every template on every item with the cues and report per "
        "family and split how often a unit carrying a fact is read as the author's claim "
        "(seconds, no model)",
    )
    hacking.add_argument(
        "--no-floor-check",
        action="store_true",
        help="skip scoring every master key alone on every judge",
    )
    _seed(hacking, "seed of the instances drawn (the split does not depend on it)")
    _backend(hacking, "LLM backend (default: RUBRICATE_LLM_BACKEND)")
    _json(hacking, "write the report here")
    hacking.set_defaults(func=_eval_hacking)


# --- handlers that do more than run one coroutine ---------------------------------------------


def _eval_grounding(args: argparse.Namespace) -> int:
    from rubricate.evaluation.grounding import SHIPPED_FEATURES, eval_grounding

    if args.features is None:
        args.features = SHIPPED_FEATURES
    return eval_grounding(args)


def _eval_hacking(args: argparse.Namespace) -> int:
    if not args.reading:
        return _runs("rubricate.evaluation.hacking", "eval_hacking")(args)
    from rubricate.evaluation import harness
    from rubricate.evaluation.hacking_items import ITEMS
    from rubricate.evaluation.hacking_reading import format_reading, reading_report

    report = reading_report(ITEMS[: args.items] if args.items else ITEMS, seed=args.seed)
    print(format_reading(report))
    harness.write_report(args.json_path, report)
    return 0


def _eval_injection(args: argparse.Namespace) -> int:
    import asyncio

    if args.judge != "stagewise":
        from rubricate.evaluation.injection_judges import KINDS, eval_judges

        kinds = list(KINDS) if args.judge == "all" else [args.judge]
        return asyncio.run(eval_judges(args, kinds))
    if args.fake_judge:
        print("rubricate eval injection: --fake-judge is for --judge other than stagewise")
        return 2
    from rubricate.evaluation.injection import eval_injection

    return asyncio.run(eval_injection(args))
