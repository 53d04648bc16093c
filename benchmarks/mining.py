"""Mining benchmark: passages examined per minute. Prints figures; asserts nothing.

A mining job over the demo corpus (Debian's python3.11-doc; the `small` subset: the json,
csv and pathlib pages) through the embedded platform's public API (Celery eager, Qdrant local
mode, all-MiniLM-L6-v2 embeddings):

1. `fake` judge: the pipeline's own throughput (retrieval, embedding, persistence after
   every step) with instant fake LLM answers;
2. `embedded` judge: the real CPU model (Qwen2.5-Coder-1.5B Q4) for every LLM step, with
   small limits because each judge call takes seconds to minutes on 2 cores.

"Passages examined" counts the retrieved, previously unseen passages the temporal check
judged (each then kept or discarded); ingestion time is reported separately.

    python benchmarks/mining.py [--judges fake embedded] [--max-nodes 12] [--subset small]
"""

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from rubricate.embedded import SERVICES, EmbeddedPlatform
from rubricate.llm.base import LLMBackend
from rubricate.miner.demo_corpus import subset
from rubricate.testing.fake_judge import FakeJudgeBackend
from rubricate.testing.fake_mining import fake_mining_handlers

QUESTION = "How do I encode Python objects as JSON strings?"
LIMITS: dict[str, dict[str, Any]] = {
    # the fake answers instantly: a wide tree
    "fake": {"max_nodes": 120, "max_depth": 3, "rewrites_per_passage": 3,
             "similarity_threshold": 0.45},
    # every step of the real model costs seconds to minutes on a CPU: a small tree
    "embedded": {"max_nodes": 8, "max_depth": 1, "rewrites_per_passage": 1,
                 "similarity_threshold": 0.6},
}  # fmt: skip


async def _wait(client: httpx.AsyncClient, job_id: str) -> dict[str, Any]:
    while True:
        job: dict[str, Any] = (await client.get(f"/v1/jobs/{job_id}")).json()
        if job["state"] in ("succeeded", "failed", "cancelled"):
            return job
        await asyncio.sleep(0.25)


def documents_of(folder: Path) -> list[dict[str, str]]:
    return [
        {"id": p.relative_to(folder).as_posix(), "content": p.read_text(), "format": "html"}
        for p in sorted(folder.rglob("*.html"))
    ]


async def run(
    judge: str, *, documents: list[dict[str, str]], limits: dict[str, Any]
) -> dict[str, Any]:
    backend: LLMBackend | None = (
        FakeJudgeBackend(handlers=fake_mining_handlers()) if judge == "fake" else None
    )
    with tempfile.TemporaryDirectory() as tmp:
        platform = EmbeddedPlatform(
            data_dir=Path(tmp), ports=dict.fromkeys(SERVICES, 0), backend=backend
        )
        async with platform, httpx.AsyncClient(base_url=platform.urls["gateway"], timeout=60) as c:
            started = time.perf_counter()
            job = (
                await c.post("/v1/corpora", json={"name": "pydocs", "documents": documents})
            ).json()
            ingest = await _wait(c, job["id"])
            ingest_s = time.perf_counter() - started
            started = time.perf_counter()
            body = {"question": QUESTION, "corpus": "pydocs", **limits}
            job = (await c.post("/v1/nuggets/mine", json=body)).json()
            mined = await _wait(c, job["id"])
            mine_s = time.perf_counter() - started
    progress = mined["progress"]
    return {
        "judge": judge,
        "state": mined["state"],
        "error": mined.get("error"),
        "documents": len(documents),
        "passages_indexed": ingest["progress"].get("passages", 0),
        "ingest_s": ingest_s,
        "mine_s": mine_s,
        "passages_examined": progress["passages_examined"],
        "passages_kept": progress["passages_kept"],
        "nodes_expanded": progress["nodes_expanded"],
        "nuggets": progress["nuggets_so_far"],
        "llm_calls": progress["usage"]["calls"],
        "completion_tokens": progress["usage"]["completion_tokens"],
        "per_minute": progress["passages_examined"] / (mine_s / 60) if mine_s else 0.0,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--judges", nargs="+", default=["fake", "embedded"])
    parser.add_argument("--subset", default="small")
    parser.add_argument("--max-nodes", type=int, default=None, help="both judges")
    args = parser.parse_args(argv)
    folder = subset(args.subset)
    documents = documents_of(folder)
    print(f"mining benchmark: corpus {folder} · question {QUESTION!r}")
    for judge in args.judges:
        limits = dict(LIMITS[judge])
        if args.max_nodes:
            limits["max_nodes"] = args.max_nodes
        print(f"  {judge} judge limits: {limits}")
        r = asyncio.run(run(judge, documents=documents, limits=limits))
        print(
            f"  {r['judge']:>8} judge: {r['state']}; ingest {r['documents']} docs → "
            f"{r['passages_indexed']} passages in {r['ingest_s']:.1f} s; mining "
            f"{r['mine_s']:.1f} s: {r['passages_examined']} passages examined "
            f"({r['per_minute']:.1f}/min), {r['passages_kept']} kept, "
            f"{r['nodes_expanded']} expanded, {r['nuggets']} nuggets, {r['llm_calls']} LLM "
            f"calls, {r['completion_tokens']} completion tokens"
            + (f" · error: {r['error']}" if r["error"] else "")
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
