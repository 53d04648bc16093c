"""`rubricate eval ...` subcommands (judge fidelity). Heavy imports happen when one runs."""

import argparse
from pathlib import Path


def register(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    evaluate = subparsers.add_parser("eval", help="measure judge fidelity on labelled data")
    sub = evaluate.add_subparsers(dest="eval_command", required=True)

    nuggets = sub.add_parser(
        "nuggets",
        help="nugget verification against reference labels (RAG24-style JSONL)",
        description="Run the platform's nugget verification on every (answer, nugget) pair "
        "of a labelled JSONL file and report agreement with the reference labels.",
    )
    nuggets.add_argument("--data", type=Path, required=True, help="labelled JSONL file")
    nuggets.add_argument("--limit", type=int, default=None, help="at most this many pairs")
    nuggets.add_argument("--per-topic", type=int, default=None, help="nuggets per topic")
    nuggets.add_argument("--seed", type=int, default=0, help="seed of the topic and nugget sample")
    nuggets.add_argument(
        "--concurrency", type=int, default=1, help="records verified at once (default 1)"
    )
    nuggets.add_argument("--batch-size", type=int, default=None, help="nuggets per verifier call")
    nuggets.add_argument(
        "--backend",
        choices=("embedded", "openai", "vllm"),
        default=None,
        help="LLM backend of the embedded platform (default: RUBRICATE_LLM_BACKEND)",
    )
    nuggets.add_argument(
        "--judge",
        choices=("platform", "lexical"),
        default="platform",
        help="platform: the nugget verifier; lexical: word-overlap baseline, no model",
    )
    nuggets.add_argument(
        "--gateway", default=None, help="URL of a running gateway instead of an embedded one"
    )
    nuggets.add_argument(
        "--probabilities",
        action="store_true",
        help="ask for label probabilities (embedded: loads the model with all logits)",
    )
    nuggets.add_argument("--json", type=Path, default=None, dest="json_path", help="write here")
    nuggets.set_defaults(func=_eval_nuggets)


def _eval_nuggets(args: argparse.Namespace) -> int:
    import asyncio

    from rubricate.evaluation.runner import eval_nuggets

    return asyncio.run(eval_nuggets(args))
