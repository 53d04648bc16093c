"""A real Celery worker process (Redis broker, PostgreSQL) runs the audits the miner API
queues. Its reference judge is built from `RUBRICATE_AUDIT_LLM_*`: the openai backend,
pointed at a fake OpenAI-compatible server answering with the planted honest judge."""

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
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from rubricate.common.tenancy import TENANT_HEADER
from rubricate.llm.base import GenerationParams
from rubricate.miner import celery_app
from rubricate.miner.app import create_app as create_miner
from rubricate.mining.miner.settings import MinerSettings
from rubricate.testing.fake_judge import fake_unit_kinds
from tests.audit.planted import judge, policy_texts, scored_group, sheet_handler
from tests.support.servers import serve_app

FAIL = "FAIL-THE-REFERENCE"
"""A trajectory with this text makes the fake reference server answer 500."""


def fake_openai_server() -> FastAPI:
    """A chat-completions endpoint answering the verifier's score sheets like the planted
    honest judge (a fake: it judges nothing)."""
    app = FastAPI()
    handle = sheet_handler(gamed=False)

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": "planted-reference", "object": "model"}]}

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> JSONResponse:
        body = await request.json()
        user = body["messages"][-1]["content"]
        if FAIL in user:
            return JSONResponse({"error": {"message": "planted failure"}}, status_code=500)
        schema = (body.get("response_format") or {}).get("json_schema") or {}
        if schema.get("name") == "unit_kinds":  # the answer's units: all content
            text = fake_unit_kinds(user, GenerationParams(schema_name="unit_kinds"))
        else:
            text = handle(user, GenerationParams(schema_name="score_sheet"))
        return JSONResponse(
            {
                "id": "x",
                "object": "chat.completion",
                "model": "planted-reference",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
            }
        )

    return app


@dataclass
class Stack:
    client: httpx.AsyncClient
    env: dict[str, str]
    log_dir: Path


@pytest.fixture
async def stack(tmp_path: Path, pg_url: str, redis_url: str, tenant: str) -> AsyncIterator[Stack]:
    queue = f"rubricate-audit-test-{uuid.uuid4().hex[:8]}"
    settings = MinerSettings(
        data_dir=tmp_path, database_url=pg_url, broker_url=redis_url, queue=queue
    )
    with serve_app(fake_openai_server()) as reference_port:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": os.environ.get("HOME", "/root"),
            "RUBRICATE_MINER_BROKER_URL": redis_url,
            "RUBRICATE_MINER_DATABASE_URL": pg_url,
            "RUBRICATE_MINER_DATA_DIR": str(tmp_path),
            "RUBRICATE_MINER_QUEUE": queue,
            "RUBRICATE_AUDIT_LLM_BACKEND": "openai",
            "RUBRICATE_AUDIT_LLM_BASE_URL": f"http://127.0.0.1:{reference_port}/v1",
            "RUBRICATE_AUDIT_LLM_MODEL": "planted-reference",
            "RUBRICATE_AUDIT_LLM_MAX_RETRIES": "0",
            "RUBRICATE_AUDIT_SCORING_DESIGN": "generate",
            "RUBRICATE_WORKER_METRICS_PORT": "0",
            "RUBRICATE_LOG_FORMAT": "text",
        }
        try:
            with serve_app(create_miner(settings)) as miner_port:
                async with httpx.AsyncClient(
                    base_url=f"http://127.0.0.1:{miner_port}",
                    timeout=30,
                    headers={TENANT_HEADER: tenant},
                ) as client:
                    yield Stack(client=client, env=env, log_dir=tmp_path)
        finally:
            # the module-level Celery app goes back to eager for the tests that follow
            celery_app.configure(
                celery_app.app, MinerSettings(database_url="sqlite://", broker_url=None)
            )


@contextlib.contextmanager
def worker(stack: Stack) -> Iterator[subprocess.Popen[bytes]]:
    log = (stack.log_dir / "worker.log").open("wb")
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
            "--hostname=audit@%h",
        ],
        env=stack.env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        yield process
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=30)
        log.close()


async def finished(stack: Stack, scoring_id: str, *, timeout_s: float = 120) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        found: dict[str, Any] = (await stack.client.get(f"/v1/audit/groups/{scoring_id}")).json()
        if found.get("status") in ("done", "failed"):
            return found
        log = (stack.log_dir / "worker.log").read_text(errors="replace")[-3000:]
        assert time.monotonic() < deadline, (found, log)
        await asyncio.sleep(0.1)


async def test_a_worker_audits_queued_groups_with_the_configured_reference(stack: Stack) -> None:
    live = judge(gamed=True)
    gamed = await scored_group(
        live, scoring_id="sc_" + uuid.uuid4().hex, question_id="q", step=3, texts=policy_texts(3)
    )
    failing = await scored_group(
        live,
        scoring_id="sc_" + uuid.uuid4().hex,
        question_id="q2",
        step=4,  # its own step: a step's first groups are audited up to the audit's share
        texts=[t.replace("answer 0", f"answer 0 {FAIL}") for t in policy_texts(1)],
    )
    for body in (gamed, failing):
        response = await stack.client.post("/v1/audit/groups", json=body.model_dump(mode="json"))
        assert response.status_code == 202, response.text
        assert response.json()["status"] == "pending"  # each question's first group
    with worker(stack):
        done = await finished(stack, gamed.scoring_id)
        failed = await finished(stack, failing.scoring_id)
    assert done["status"] == "done", done.get("error")
    result = done["result"]
    assert result["reference_model"] == "planted-reference"
    assert result["reference_design"] == "generate"
    answer = {r["rubric_id"]: r for r in result["rubrics"]}["r-answer"]
    assert answer["live_mean"] > answer["reference_mean"]  # the phrase is not rewarded
    assert failed["status"] == "failed" and failed["result"] is None
    assert "judge failed" in failed["error"]
