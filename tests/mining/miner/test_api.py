"""The miner through the gateway, embedded (Celery eager, Qdrant local mode) on PostgreSQL,
with the real embedding model, a real corpus (Python's documentation) and the fake mining
judge for the LLM steps."""

from pathlib import Path

import httpx

from rubricate.common.tenancy import TENANT_HEADER
from rubricate.db.engine import make_engine
from rubricate.llm.base import GenerationParams
from rubricate.llm.errors import TransportError
from rubricate.mining.miner.repository import MinerRepository
from tests.support.miner import (
    Platform,
    embedded,
    fake_judge,
    html_documents,
    wait_for_job,
)

QUESTION = "How do I encode Python objects as JSON strings?"


async def ingest(client: httpx.AsyncClient, corpus: str, folder: Path) -> dict[str, object]:
    response = await client.post(
        "/v1/corpora", json={"name": corpus, "documents": html_documents(folder)}
    )
    assert response.status_code == 202, response.text
    job = await wait_for_job(client, response.json()["id"])
    assert job["state"] == "succeeded", job
    return job


async def test_ingest_mine_and_read_nuggets(running: Platform, small_corpus: Path) -> None:
    client = running.client
    job = await ingest(client, "pydocs", small_corpus)
    assert job["kind"] == "ingest" and job["params"] == {"documents": 3}
    assert job["progress"]["documents_done"] == 3
    corpora = (await client.get("/v1/corpora")).json()["corpora"]
    [corpus] = corpora
    assert corpus["name"] == "pydocs" and corpus["dim"] == 384
    assert corpus["passages"] == job["progress"]["passages"] > 60
    assert corpus["embedding_model"] == "all-minilm-l6-v2"

    response = await client.post(
        "/v1/nuggets/mine",
        json={
            "question": QUESTION,
            "corpus": "pydocs",
            "max_nodes": 24,
            "max_depth": 2,
            "rewrites_per_passage": 2,
            "similarity_threshold": 0.6,
        },
    )
    assert response.status_code == 202, response.text
    queued = response.json()
    assert queued["kind"] == "mine" and queued["params"]["max_nodes"] == 24
    job = await wait_for_job(client, queued["id"])
    assert job["state"] == "succeeded", job
    progress = job["progress"]
    assert progress["phase"] == "done"
    assert progress["nodes_expanded"] >= 1
    assert 1 <= progress["passages_kept"] <= progress["passages_examined"]
    assert progress["queries"] + progress["passages_kept"] <= 24
    assert progress["usage"]["calls"] > 0
    result = job["result"]
    assert len(result["queries"]) >= 2  # the question plus at least one rewrite
    assert result["nuggets"], result
    for nugget in result["nuggets"]:
        assert nugget["importance"] in ("vital", "okay")
        assert 7 <= len(nugget["text"].split()) <= 23
        for source in nugget["provenance"]:
            assert source["passage_id"] in result["passages"]
            assert source["passage_id"].startswith("library/")
            assert source["query_path"][0] == QUESTION
            assert set(source["query_path"]) <= set(result["queries"])
    assert any("json" in n["text"].lower() for n in result["nuggets"])

    stored = await client.get("/v1/nuggets", params={"question": f"  {QUESTION.upper()} "})
    assert stored.status_code == 200, stored.text
    view = stored.json()
    assert view["job_id"] == job["id"] and view["corpus"] == "pydocs"
    assert view["nuggets"] == result["nuggets"]
    scoped = await client.get("/v1/nuggets", params={"question": QUESTION, "corpus": "other"})
    assert scoped.status_code == 404
    assert scoped.json()["error"]["type"] == "not_found"


async def test_bad_requests_get_one_error_shape(running: Platform) -> None:
    client = running.client
    unknown = await client.post("/v1/nuggets/mine", json={"question": "q", "corpus": "nope"})
    assert unknown.status_code == 404
    assert unknown.json()["error"]["field"] == "corpus"
    bad_name = await client.post("/v1/nuggets/mine", json={"question": "q", "corpus": "a/b"})
    assert bad_name.status_code == 422
    assert bad_name.json()["error"]["field"] == "corpus"
    both = await client.post(
        "/v1/corpora",
        json={"name": "c", "path": "/tmp", "documents": [{"id": "a", "content": "x"}]},
    )
    assert both.status_code == 422
    bad_jsonl = await client.post(
        "/v1/corpora",
        json={
            "name": "c",
            "documents": [
                {"id": "ok", "content": "Fine."},
                {"id": "f.jsonl", "content": '{"text": "a"}\n{oops', "format": "jsonl"},
            ],
        },
    )
    assert bad_jsonl.status_code == 422
    assert bad_jsonl.json()["error"]["field"] == "documents[1]"
    outside = await client.post("/v1/corpora", json={"name": "c", "path": "/etc"})
    assert outside.status_code == 403
    assert outside.json()["error"]["type"] == "forbidden_path"
    assert (await client.get("/v1/corpora")).json() == {"corpora": []}  # nothing stored
    missing = await client.get("/v1/jobs/00000000-0000-0000-0000-000000000000")
    assert missing.status_code == 404


async def test_cancel_stops_a_running_job_and_keeps_its_tree(
    tmp_path: Path, pg_url: str, tenant: str, small_corpus: Path
) -> None:
    async with embedded(tmp_path, pg_url, tenant, fake_judge(delay_s=0.3)) as running:
        client = running.client
        await ingest(client, "pydocs", small_corpus)
        response = await client.post(
            "/v1/nuggets/mine",
            json={"question": QUESTION, "corpus": "pydocs", "similarity_threshold": 0.2},
        )
        job_id = response.json()["id"]
        while (await client.get(f"/v1/jobs/{job_id}")).json()["progress"]["passages_kept"] == 0:
            pass
        cancel = await client.post(f"/v1/jobs/{job_id}/cancel")
        assert cancel.status_code == 200 and cancel.json()["cancel_requested"] is True
        job = await wait_for_job(client, job_id, timeout_s=30)
        assert job["state"] == "cancelled"
        assert job["progress"]["passages_kept"] >= 1 and job["result"] is None
        again = await client.post(f"/v1/jobs/{job_id}/cancel")
        assert again.json()["state"] == "cancelled"
        missing = await client.get("/v1/nuggets", params={"question": QUESTION})
        assert missing.status_code == 404


async def test_a_failed_job_resumes_from_its_tree(
    tmp_path: Path, pg_url: str, tenant: str, small_corpus: Path
) -> None:
    """The rubric-generator is down during the job: the job fails with the error (no
    nuggets, no verdict); once it is back, resume continues from the stored tree."""
    backend = fake_judge()
    handlers = dict(backend.handlers)
    outage = {"on": True}

    def rewrites(prompt: str, params: GenerationParams) -> str:
        if outage["on"]:
            raise TransportError("fake outage of the rubric-generator's model")
        return handlers["query_rewrites"](prompt, params)

    backend.handlers["query_rewrites"] = rewrites
    async with embedded(tmp_path, pg_url, tenant, backend, judge_retries=0) as running:
        client = running.client
        await ingest(client, "pydocs", small_corpus)
        response = await client.post(
            "/v1/nuggets/mine",
            json={"question": QUESTION, "corpus": "pydocs", "similarity_threshold": 0.6},
        )
        job_id = response.json()["id"]
        failed = await wait_for_job(client, job_id)
        assert failed["state"] == "failed" and "rubric-generator" in failed["error"]
        assert failed["result"] is None
        assert failed["progress"]["passages_kept"] >= 1  # the retrieval before the outage
        examined = failed["progress"]["passages_examined"]
        assert (await client.get("/v1/nuggets", params={"question": QUESTION})).status_code == 404

        outage["on"] = False
        assert (await client.post(f"/v1/jobs/{job_id}/resume")).status_code == 404  # miner only
        miner = httpx.AsyncClient(
            base_url=running.platform.urls["miner"], headers={TENANT_HEADER: tenant}
        )
        async with miner:
            resumed = await miner.post(f"/v1/jobs/{job_id}/resume")
            assert resumed.status_code == 202, resumed.text
            done = await wait_for_job(client, job_id)
            assert done["state"] == "succeeded" and done["attempts"] == 2
            assert done["result"]["nuggets"]
            assert done["progress"]["passages_examined"] >= examined
            again = await miner.post(f"/v1/jobs/{job_id}/resume")
            assert again.status_code == 409


async def test_server_side_paths_only_under_the_ingest_roots(
    tmp_path: Path, pg_url: str, tenant: str, small_corpus: Path
) -> None:
    async with embedded(
        tmp_path, pg_url, tenant, fake_judge(), ingest_roots=[small_corpus]
    ) as running:
        client = running.client
        response = await client.post(
            "/v1/corpora", json={"name": "pydocs", "path": str(small_corpus / "library")}
        )
        assert response.status_code == 202, response.text
        assert response.json()["params"] == {"path": str(small_corpus / "library")}
        job = await wait_for_job(client, response.json()["id"])
        assert job["state"] == "succeeded" and job["progress"]["documents_done"] == 3
        escape = await client.post(
            "/v1/corpora", json={"name": "pydocs", "path": str(small_corpus / "..")}
        )
        assert escape.status_code == 403


async def test_embedded_shutdown_requeues_a_running_job_and_the_next_start_resumes_it(
    tmp_path: Path, pg_url: str, tenant: str, small_corpus: Path
) -> None:
    async with embedded(tmp_path, pg_url, tenant, fake_judge(delay_s=0.2)) as running:
        client = running.client
        await ingest(client, "pydocs", small_corpus)
        response = await client.post(
            "/v1/nuggets/mine",
            json={"question": QUESTION, "corpus": "pydocs", "similarity_threshold": 0.6},
        )
        job_id = response.json()["id"]
        progress: dict[str, int] = {"nodes_expanded": 0}
        while progress["nodes_expanded"] < 1:
            progress = (await client.get(f"/v1/jobs/{job_id}")).json()["progress"]
    # the platform stopped: the job went back to the queue with its tree
    engine = make_engine(pg_url, pooled=False)
    try:
        paused = MinerRepository(engine).get_job(job_id)
    finally:
        engine.dispose()
    assert paused is not None and paused.tree is not None
    assert (paused.state, paused.worker, paused.attempts) == ("queued", None, 1)
    assert paused.steps >= 3
    async with embedded(tmp_path, pg_url, tenant, fake_judge()) as restarted:
        done = await wait_for_job(restarted.client, job_id)
        assert done["state"] == "succeeded" and done["attempts"] == 2
        assert done["steps"] > paused.steps
        assert done["result"]["nuggets"]
