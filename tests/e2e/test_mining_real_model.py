"""Nugget mining on the real embedded model (Qwen2.5-Coder-1.5B Q4_K_M on CPU): slow.

A tiny tree over real documentation pages (Debian's python3.11-doc: json, csv, pathlib):
every LLM step — temporal checks, a rewrite, a duplicate check, extraction, merging and
labelling — runs on the model through the public API.
"""

import asyncio
import time
from pathlib import Path

import httpx
import pytest

from rubricate.embedded import SERVICES, EmbeddedPlatform
from rubricate.miner.demo_corpus import subset

pytestmark = pytest.mark.model

QUESTION = "How do I encode Python objects as JSON strings?"


async def test_a_small_mining_job_with_the_embedded_model(tmp_path: Path) -> None:
    folder = subset("small")
    documents = [
        {"id": p.relative_to(folder).as_posix(), "content": p.read_text(), "format": "html"}
        for p in sorted(folder.rglob("*.html"))
    ]
    platform = EmbeddedPlatform(data_dir=tmp_path, ports=dict.fromkeys(SERVICES, 0))
    async with platform, httpx.AsyncClient(base_url=platform.urls["gateway"], timeout=60) as c:

        async def finished(job_id: str, timeout_s: float) -> dict[str, object]:
            deadline = time.monotonic() + timeout_s
            while True:
                job: dict[str, object] = (await c.get(f"/v1/jobs/{job_id}")).json()
                if job["state"] in ("succeeded", "failed", "cancelled"):
                    return job
                assert time.monotonic() < deadline, job
                await asyncio.sleep(1)

        ingest = (await c.post("/v1/corpora", json={"name": "py", "documents": documents})).json()
        assert (await finished(str(ingest["id"]), 600))["state"] == "succeeded"
        mine = await c.post(
            "/v1/nuggets/mine",
            json={
                "question": QUESTION,
                "corpus": "py",
                "max_nodes": 5,
                "max_depth": 1,
                "rewrites_per_passage": 1,
                "similarity_threshold": 0.7,
            },
        )
        job = await finished(mine.json()["id"], 1800)
    assert job["state"] == "succeeded", job
    result = job["result"]
    assert isinstance(result, dict)
    print(f"\nqueries: {result['queries']}\nusage: {result['usage']}")
    for nugget in result["nuggets"]:
        print(f"  [{nugget['importance']}] {nugget['text']}")
        assert nugget["importance"] in ("vital", "okay")
        assert nugget["provenance"][0]["query_path"][0] == QUESTION
    assert result["nuggets"], "the model extracted no nugget from the json pages"
    assert result["usage"]["calls"] >= 5
