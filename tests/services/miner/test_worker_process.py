"""A real Celery worker process (Redis broker, PostgreSQL, Qdrant local mode, the real
embedding model) runs ingestion and mining jobs submitted through the miner API; the fake
mining judge answers the LLM steps. One worker is SIGKILLed mid-job and a new one resumes
the job from its stored tree."""

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi import FastAPI

from rubricate.common.tenancy import TENANT_HEADER
from rubricate.embedded import free_port
from rubricate.llm.settings import LLMSettings
from rubricate.miner import celery_app
from rubricate.miner.app import create_app as create_miner
from rubricate.mining.miner.settings import MinerSettings
from rubricate.rubric_generator.app import create_app as create_generator
from rubricate.testing.fake_judge import FakeJudgeBackend
from rubricate.testing.fake_mining import fake_mining_handlers
from rubricate.verifier.app import create_app as create_verifier
from tests.support.miner import html_documents, wait_for_job

QUESTION = "How do I encode Python objects as JSON strings?"
LEASE_S = 3.0


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@contextlib.asynccontextmanager
async def serve(app: FastAPI) -> AsyncIterator[str]:
    port = free_port()
    server = _Server(uvicorn.Config(app, port=port, log_level="warning", lifespan="on"))
    task = asyncio.create_task(server.serve())
    while not server.started:
        assert not task.done(), "server stopped during start-up"
        await asyncio.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task


@dataclass
class Stack:
    client: httpx.AsyncClient
    backend: FakeJudgeBackend
    env: dict[str, str]
    log_dir: Path


@pytest.fixture
async def stack(tmp_path: Path, pg_url: str, redis_url: str, tenant: str) -> AsyncIterator[Stack]:
    backend = FakeJudgeBackend(handlers=fake_mining_handlers(), delay_s=0.15)
    llm = LLMSettings(max_retries=1, backoff_base_s=0.001, backoff_max_s=0.002)
    queue = f"rubricate-miner-test-{uuid.uuid4().hex[:8]}"
    async with (
        serve(create_generator(llm=llm, backend=backend)) as generator_url,
        serve(create_verifier(llm=llm, backend=backend)) as verifier_url,
    ):
        settings = MinerSettings(
            data_dir=tmp_path,
            database_url=pg_url,
            broker_url=redis_url,
            queue=queue,
            rubric_generator_url=generator_url,
            verifier_url=verifier_url,
            lease_s=LEASE_S,
            heartbeat_s=0.5,
        )
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": os.environ.get("HOME", "/root"),
            "RUBRICATE_MINER_BROKER_URL": redis_url,
            "RUBRICATE_MINER_DATABASE_URL": pg_url,
            "RUBRICATE_MINER_DATA_DIR": str(tmp_path),
            "RUBRICATE_MINER_QUEUE": queue,
            "RUBRICATE_MINER_RUBRIC_GENERATOR_URL": generator_url,
            "RUBRICATE_MINER_VERIFIER_URL": verifier_url,
            "RUBRICATE_MINER_LEASE_S": str(LEASE_S),
            "RUBRICATE_MINER_HEARTBEAT_S": "0.5",
            "RUBRICATE_WORKER_METRICS_PORT": "0",
            "RUBRICATE_LOG_FORMAT": "text",
        }
        try:
            async with (
                serve(create_miner(settings)) as miner_url,
                httpx.AsyncClient(
                    base_url=miner_url, timeout=30, headers={TENANT_HEADER: tenant}
                ) as client,
            ):
                yield Stack(client=client, backend=backend, env=env, log_dir=tmp_path)
        finally:
            # the module-level Celery app goes back to eager for the tests that follow
            celery_app.configure(
                celery_app.app, MinerSettings(database_url="sqlite://", broker_url=None)
            )


@contextlib.contextmanager
def worker(stack: Stack, name: str) -> Iterator[subprocess.Popen[bytes]]:
    log = (stack.log_dir / f"worker-{name}.log").open("wb")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "rubricate.miner.celery_app",
            "worker",
            "--loglevel=INFO",
            "--concurrency=1",
            "--pool=prefork",
            "--without-gossip",
            "--without-mingle",
            f"--hostname={name}@%h",
        ],
        env=stack.env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group: SIGKILL reaches the pool children
    )
    try:
        yield process
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)
        log.close()


def worker_log(stack: Stack, name: str) -> str:
    return (stack.log_dir / f"worker-{name}.log").read_text(errors="replace")[-4000:]


async def wait_until(
    client: httpx.AsyncClient, job_id: str, done: Any, *, timeout_s: float
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        job: dict[str, Any] = (await client.get(f"/v1/jobs/{job_id}")).json()
        if done(job):
            return job
        assert job["state"] not in ("failed", "cancelled"), job
        assert time.monotonic() < deadline, job
        await asyncio.sleep(0.1)


def temporal_calls_for(backend: FakeJudgeBackend, query: str) -> int:
    marker = f"Query:\n<untrusted>{query}</untrusted>"
    return sum(1 for task, prompt in backend.calls if task == "temporal_check" and marker in prompt)


async def test_worker_killed_mid_job_resumes_from_the_stored_tree(
    stack: Stack, small_corpus: Path
) -> None:
    client = stack.client
    with worker(stack, "first") as first:
        response = await client.post(
            "/v1/corpora", json={"name": "pydocs", "documents": html_documents(small_corpus)}
        )
        assert response.status_code == 202, response.text
        ingest = await wait_for_job(client, response.json()["id"], timeout_s=300)
        assert ingest["state"] == "succeeded", (ingest, worker_log(stack, "first"))
        assert ingest["progress"]["passages"] > 60

        response = await client.post(
            "/v1/nuggets/mine",
            json={
                "question": QUESTION,
                "corpus": "pydocs",
                "max_nodes": 40,
                "max_depth": 3,
                "rewrites_per_passage": 2,
                "similarity_threshold": 0.6,
            },
        )
        assert response.status_code == 202, response.text
        job_id = response.json()["id"]
        running = await wait_until(
            client,
            job_id,
            lambda j: j["state"] == "running" and j["progress"]["nodes_expanded"] >= 2,
            timeout_s=180,
        )
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(timeout=30)

    killed = (await client.get(f"/v1/jobs/{job_id}")).json()
    assert killed["state"] == "running" and killed["attempts"] == 1
    assert killed["steps"] >= running["steps"]
    root_checks = temporal_calls_for(stack.backend, QUESTION)
    assert root_checks >= 1
    await asyncio.sleep(LEASE_S + 0.5)  # the dead worker's lease runs out
    assert (await client.get(f"/v1/jobs/{job_id}")).json()["steps"] == killed["steps"]

    with worker(stack, "second"):
        done = await wait_until(client, job_id, lambda j: j["state"] == "succeeded", timeout_s=300)
    assert done["attempts"] == 2, worker_log(stack, "second")
    assert done["steps"] > killed["steps"]
    # resumed, not restarted: the question's own retrieval was judged once only
    assert temporal_calls_for(stack.backend, QUESTION) == root_checks
    assert done["progress"]["nodes_expanded"] >= killed["progress"]["nodes_expanded"]
    nuggets = done["result"]["nuggets"]
    assert nuggets and all(n["provenance"] for n in nuggets)
    stored = (await client.get("/v1/nuggets", params={"question": QUESTION})).json()
    assert stored["job_id"] == job_id and stored["nuggets"] == nuggets
