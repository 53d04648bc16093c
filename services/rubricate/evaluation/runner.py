"""Runs `rubricate eval nuggets` against a gateway: a running one or an embedded platform."""

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import httpx

from rubricate.evaluation.nuggets import (
    RunConfig,
    format_report,
    load_records,
    run_records,
    select,
    summarize,
)


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
    if args.gateway:
        config.extra["gateway"] = args.gateway
        async with httpx.AsyncClient(base_url=args.gateway, timeout=config.timeout_s) as client:
            started = time.perf_counter()
            runs = await run_records(client, chosen, config)
            wall = time.perf_counter() - started
    else:
        from rubricate.embedded import SERVICES, EmbeddedPlatform
        from rubricate.llm.settings import LLMSettings

        overrides: dict[str, object] = {}
        if args.backend:
            overrides["backend"] = args.backend
        if args.probabilities:
            overrides["embedded_logprobs"] = True
        llm = LLMSettings(**overrides)  # type: ignore[arg-type]
        config.extra["backend"] = llm.backend
        config.extra["model"] = llm.model or llm.embedded_model
        with tempfile.TemporaryDirectory() as tmp:
            platform = EmbeddedPlatform(
                data_dir=Path(tmp), ports=dict.fromkeys(SERVICES, 0), llm=llm
            )
            async with (
                platform,
                httpx.AsyncClient(
                    base_url=platform.urls["gateway"], timeout=config.timeout_s
                ) as client,
            ):
                started = time.perf_counter()
                runs = await run_records(client, chosen, config)
                wall = time.perf_counter() - started
    summary = summarize(runs, wall_s=wall, config=config)
    print(format_report(summary))
    if args.json_path is not None:
        args.json_path.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
        print(f"written to {args.json_path}")
    return 0 if summary["pairs_judged"] else 1
