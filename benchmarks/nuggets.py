"""Nugget benchmarks. Prints figures; asserts nothing.

1. Verification throughput: nuggets judged per second (and seconds per nugget) through
   `POST /v1/nuggets/verify` on the embedded model (real CPU inference), on a few real
   records of the RAG24 dev file (`../shared/data/rag24-nuggets-dev.jsonl`), per verifier
   design: `choices` (the embedded default: one forward pass per (block, nugget), the block
   a cached prefix) and `generate` with per-call batch sizes 1 and 10 (one call per (block,
   nugget) or per (block, ten nuggets)). Each design runs on its own platform; a warm-up
   request on another record runs first, so the first series does not pay for loading the
   model's pages.

    python benchmarks/nuggets.py [--records 2] [--nuggets 8] [--designs choices generate]
        [--batch-sizes 1 10] [--no-warmup]
"""

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from rubricate.embedded import SERVICES, EmbeddedPlatform

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "rag24-nuggets-dev.jsonl"


def load_records(path: Path, *, records: int, nuggets: int) -> list[dict[str, Any]]:
    """The first `records` dev records, each cut to its first `nuggets` nuggets."""
    out: list[dict[str, Any]] = []
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if len(out) >= records:
                break
            rec = json.loads(line)
            kept = [n for n in rec["nuggets"] if n["importance"] in ("vital", "okay")][:nuggets]
            out.append({**rec, "nuggets": kept})
    return out


@dataclass
class Throughput:
    design: str
    batch_size: int
    nuggets: int
    wall_s: float
    calls: int
    prompt_tokens: int
    completion_tokens: int
    failures: int

    @property
    def nuggets_per_s(self) -> float:
        return self.nuggets / self.wall_s if self.wall_s else 0.0


async def verification_throughput(
    records: list[dict[str, Any]],
    *,
    designs: list[str],
    batch_sizes: list[int],
    warmup: dict[str, Any] | None,
) -> list[Throughput]:
    """Figure 1: nuggets judged per second per design and batch size (one request per
    record, in turn). The choices design ignores the batch size: it runs once."""
    print("== nugget verification throughput, embedded model (CPU) ==", flush=True)
    results: list[Throughput] = []
    for design in designs:
        os.environ["RUBRICATE_NUGGET_TASK_DESIGN"] = design  # read when the verifier starts
        sizes = [1] if design == "choices" else batch_sizes
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            async with EmbeddedPlatform(data_dir=Path(tmp), ports=dict.fromkeys(SERVICES, 0)) as p:
                print(f"[{design}] platform and model loaded in {time.perf_counter() - t0:.1f} s")
                async with httpx.AsyncClient(base_url=p.urls["gateway"], timeout=3600) as client:
                    if warmup is not None:
                        t1 = time.perf_counter()
                        await _run(client, [warmup], design=design, batch_size=1, quiet=True)
                        print(f"[{design}] warm-up request {time.perf_counter() - t1:.1f} s")
                    for size in sizes:
                        results.append(await _run(client, records, design=design, batch_size=size))
    print(
        f"{'design':>8} {'batch':>5} {'nuggets':>7} {'wall s':>8} {'nuggets/s':>9} "
        f"{'s/nugget':>8} {'calls':>5} {'prompt tok':>10} {'compl tok':>9} {'failed':>6}"
    )
    for r in results:
        print(
            f"{r.design:>8} {r.batch_size:>5} {r.nuggets:>7} {r.wall_s:>8.1f} "
            f"{r.nuggets_per_s:>9.3f} "
            f"{r.wall_s / max(1, r.nuggets):>8.2f} {r.calls:>5} {r.prompt_tokens:>10} "
            f"{r.completion_tokens:>9} {r.failures:>6}"
        )
    return results


async def _run(
    client: httpx.AsyncClient,
    records: list[dict[str, Any]],
    *,
    design: str,
    batch_size: int,
    quiet: bool = False,
) -> Throughput:
    out = Throughput(design, batch_size, 0, 0.0, 0, 0, 0, 0)
    for rec in records:
        body = {
            "question": rec["question"],
            "answer": rec["answer"],
            "nuggets": [{"text": n["text"], "importance": n["importance"]} for n in rec["nuggets"]],
            "batch_size": batch_size,
        }
        started = time.perf_counter()
        response = await client.post("/v1/nuggets/verify", json=body)
        out.wall_s += time.perf_counter() - started
        data = response.json()
        usage = data["usage"] if response.status_code == 200 else data["error"].get("usage") or {}
        out.calls += usage.get("calls", 0)
        out.prompt_tokens += usage.get("prompt_tokens", 0)
        out.completion_tokens += usage.get("completion_tokens", 0)
        if response.status_code == 200:
            out.nuggets += len(rec["nuggets"])
        else:
            out.failures += 1
            print(f"  batch {batch_size}: {rec['topic_id']} failed: {response.text[:200]}")
        if quiet:
            continue
        print(
            f"  batch {batch_size}: {rec['topic_id']} {len(rec['nuggets'])} nuggets "
            f"{time.perf_counter() - started:.1f} s",
            flush=True,
        )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--records", type=int, default=2)
    parser.add_argument("--nuggets", type=int, default=8, help="nuggets per record")
    parser.add_argument(
        "--designs", nargs="+", choices=("choices", "generate"), default=["choices", "generate"]
    )
    parser.add_argument(
        "--batch-sizes", type=int, nargs="+", default=[1, 10], help="generate design only"
    )
    parser.add_argument("--no-warmup", action="store_true", help="measure from a cold start")
    args = parser.parse_args(argv)
    if not args.data.exists():
        print(f"no data file at {args.data} (pass --data)", file=sys.stderr)
        return 2
    loaded = load_records(args.data, records=args.records + 1, nuggets=args.nuggets)
    warmup = {**loaded[-1], "nuggets": loaded[-1]["nuggets"][:1]} if not args.no_warmup else None
    records = loaded[: args.records]
    asyncio.run(
        verification_throughput(
            records, designs=args.designs, batch_sizes=args.batch_sizes, warmup=warmup
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
