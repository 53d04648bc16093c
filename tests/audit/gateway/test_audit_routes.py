"""The audit through the public API, every service in process (Celery eager, the miner on
PostgreSQL): a scored group is handed to the audit after the trainer has its answer, the
planted reference judge (a fake) re-scores it, and the results, signals, settings and
deletion are served per tenant."""

import asyncio
import json
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client import REGISTRY
from sqlalchemy import Engine

from rubricate.audit.gateway.service import AuditSubmitter
from rubricate.audit.miner.repository import AuditRepository
from rubricate.audit.miner.runner import AuditRuntime
from rubricate.common.tenancy import TENANT_HEADER
from rubricate.common.upstream import ServiceClient
from rubricate.miner import tasks
from rubricate.stagewise.verifier.schemas import StageScoresRequest, StageScoresResponse
from rubricate.stagewise.verifier.service import UNREAD
from rubricate.testing.fake_judge import FakeJudgeBackend
from rubricate_client.schemas.stagewise import StagewiseScoreRequest, StagewiseScoreResponse
from tests.audit.planted import judge
from tests.support.gateway import trajectory
from tests.support.miner import Platform, embedded


class GatedJudge:
    """The planted honest reference judge, held until the test opens the gate."""

    def __init__(self) -> None:
        self.inner = judge(gamed=False)
        self.gate = threading.Event()

    async def read_answers(self, requests: Sequence[StageScoresRequest]) -> Sequence[Any]:
        return await self.inner.read_answers(requests)

    async def stage_scores(
        self, request: StageScoresRequest, *, read: Any = UNREAD
    ) -> StageScoresResponse:
        await asyncio.to_thread(self.gate.wait)
        return await self.inner.stage_scores(request, read=read)


@pytest.fixture
def reference(pg_engine: Engine) -> Iterator[GatedJudge]:
    gated = GatedJudge()
    tasks.configure_audit_runtime(
        AuditRuntime(
            repo=AuditRepository(pg_engine), judge=gated, model="planted", design="generate"
        )
    )
    try:
        yield gated
    finally:
        gated.gate.set()
        tasks.configure_audit_runtime(None)


@pytest.fixture
async def platform(
    tmp_path: Path, pg_url: str, tenant: str, reference: GatedJudge
) -> AsyncIterator[Platform]:
    async with embedded(tmp_path, pg_url, tenant, FakeJudgeBackend()) as p:
        try:
            yield p
        finally:
            reference.gate.set()  # held audits finish before the platform stops


def group(question: str, *, step: int) -> dict[str, Any]:
    return {
        "question": question,
        "step": step,
        "rollouts": [
            {"id": "a", "trajectory": trajectory("[[excellent]]")},
            {"id": "b", "trajectory": trajectory("plain")},
            {"id": "c", "trajectory": trajectory("[[poor]]")},
        ],
    }


async def wait_status(
    client: httpx.AsyncClient, scoring_id: str, wanted: str, *, timeout_s: float = 60
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        response = await client.get(f"/v1/audit/groups/{scoring_id}")
        if response.status_code == 200 and response.json()["status"] == wanted:
            found: dict[str, Any] = response.json()
            return found
        assert time.monotonic() < deadline, response.text
        await asyncio.sleep(0.05)


async def test_a_scored_group_is_audited_after_the_trainer_has_its_answer(
    platform: Platform, reference: GatedJudge
) -> None:
    client = platform.client
    put = await client.put("/v1/audit/settings", json={"fraction": 0.0})
    assert put.status_code == 200, put.text
    question = f"Which sources? {uuid.uuid4().hex}"
    scored = await client.post("/v1/stagewise/score", json=group(question, step=0))
    assert scored.status_code == 200, scored.text
    scoring_id = scored.json()["scoring_id"]
    # the trainer has its answer while the reference judge is still held
    pending = await wait_status(client, scoring_id, "pending")
    assert pending["reason"] == "first" and pending["result"] is None
    reference.gate.set()
    done = await wait_status(client, scoring_id, "done")
    result = done["result"]
    # the live fake scores a 2 and c 0, the honest reference scores every rubric 1
    assert result["reference_model"] == "planted"
    assert 0.0 <= result["agreement"] < 1.0
    assert result["rollout_deltas"]["a"] < 0 < result["rollout_deltas"]["c"]
    assert result["best_changed"] is False  # a ties for best under the reference

    second = await client.post("/v1/stagewise/score", json=group(question, step=1))
    second_id = second.json()["scoring_id"]
    skipped = await wait_status(client, second_id, "skipped")
    assert skipped["result"] is None

    listed = (await client.get("/v1/audit/groups")).json()["audits"]
    assert [a["scoring_id"] for a in listed] == [scoring_id]
    signals = (await client.get("/v1/audit/signals")).json()
    assert [(s["step"], s["groups"], s["audited"]) for s in signals["steps"]] == [
        (0, 1, 1),
        (1, 1, 0),
    ]

    # tenant isolation: another tenant sees none of it
    other = {TENANT_HEADER: f"{platform.tenant}-other"}
    assert (await client.get(f"/v1/audit/groups/{scoring_id}", headers=other)).status_code == 404
    assert (await client.get("/v1/audit/signals", headers=other)).json()["steps"] == []
    deleted = await client.delete("/v1/audit/groups", headers=other)
    assert deleted.json() == {"deleted": 0}
    deleted = await client.delete("/v1/audit/groups")
    assert deleted.json() == {"deleted": 2}
    assert (await client.get(f"/v1/audit/groups/{scoring_id}")).status_code == 404


async def test_bad_audit_queries_are_4xx_naming_the_field(platform: Platform) -> None:
    client = platform.client
    response = await client.get("/v1/audit/groups", params={"limit": 0})
    assert response.status_code == 422
    assert response.json()["error"]["field"] == "limit"
    response = await client.put("/v1/audit/settings", json={"fraction": 2})
    assert response.status_code == 422
    assert response.json()["error"]["field"] == "fraction"
    response = await client.get("/v1/audit/groups/not%20an%20id")
    assert response.status_code == 422


def failures() -> float:
    return REGISTRY.get_sample_value("rubricate_audit_submit_failures_total") or 0.0


async def test_a_miner_that_cannot_be_reached_never_fails_the_scoring() -> None:
    client = ServiceClient(service="miner", base_url="http://127.0.0.1:9", timeout_s=2, retries=0)
    submitter = AuditSubmitter(client)
    request = StagewiseScoreRequest.model_validate(group("q", step=0))
    response = StagewiseScoreResponse.model_validate(
        {
            "question_id": "q",
            "scoring_id": "sc_1",
            "mode": "stagewise",
            "lambda": [[1.0]],
            "rollouts": [
                {
                    "id": r.id,
                    "spans": {"plan": None, "research": None, "review": None, "answer": None},
                    "missing_stages": ["plan", "research", "review", "answer"],
                    "scores": None,
                    "returns": None,
                    "advantages": None,
                    "judgments": [],
                }
                for r in request.rollouts
            ],
            "rubrics": {},
            "pruned": [],
            "generation": {"status": "skipped"},
            "unscored_stages": [],
            "usage": {},
            "timing": {"total_s": 0, "upstream_s": 0, "overhead_s": 0},
        }
    )
    before = failures()
    submitter("t", request, response)  # returns at once, raises nothing
    await submitter.drain(timeout_s=10)
    await client.aclose()
    assert failures() == before + 1


async def test_without_a_usable_reference_the_audit_is_failed_not_agreement(
    tmp_path: Path, pg_url: str, tenant: str
) -> None:
    # embedded mode hands its model over as the reference; this fake has one scoring design
    # only, so it cannot be its own reference judge
    async with embedded(tmp_path, pg_url, tenant, FakeJudgeBackend()) as platform:
        scored = await platform.client.post(
            "/v1/stagewise/score", json=group(f"q {uuid.uuid4().hex}", step=0)
        )
        assert scored.status_code == 200, scored.text
        failed = await wait_status(platform.client, scored.json()["scoring_id"], "failed")
    assert failed["result"] is None
    assert "RUBRICATE_AUDIT_LLM_BACKEND" in failed["error"]


async def wait_job(client: httpx.AsyncClient, job_id: str, *, timeout_s: float = 60) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        response = await client.get(f"/v1/audit/replay/{job_id}")
        assert response.status_code == 200, response.text
        job = response.json()
        if job["state"] in ("succeeded", "failed"):
            return job
        assert time.monotonic() < deadline, job
        await asyncio.sleep(0.05)


async def test_replay_with_the_live_judge_and_the_current_buffer(
    platform: Platform, reference: GatedJudge
) -> None:
    reference.gate.set()
    client = platform.client
    # only the question's first group is audited (the second is skipped, not sampled by chance)
    put = await client.put("/v1/audit/settings", json={"fraction": 0.0})
    assert put.status_code == 200, put.text
    question = f"Which sources? {uuid.uuid4().hex}"
    ids = []
    for step in range(2):
        scored = await client.post("/v1/stagewise/score", json=group(question, step=step))
        assert scored.status_code == 200, scored.text
        ids.append(scored.json()["scoring_id"])
    question_id = scored.json()["question_id"]
    for scoring_id in ids:  # handed over (the hand-over runs after the answer)
        await wait_status(client, scoring_id, "done" if scoring_id == ids[0] else "skipped")

    started = await client.post(
        "/v1/audit/replay", json={"question_id": question_id, "judge": "live"}
    )
    assert started.status_code == 202, started.text
    job = await wait_job(client, started.json()["id"])
    assert job["state"] == "succeeded", job
    assert job["progress"] == {"total": 2, "done": 2, "failed": 0, "unavailable": 0}
    assert job["result"]["agreement"] == 1.0  # the fake live judge is deterministic

    started = await client.post(
        "/v1/audit/replay", json={"question_id": question_id, "judge": "buffer"}
    )
    assert started.status_code == 202, started.text
    job = await wait_job(client, started.json()["id"])
    assert job["state"] == "succeeded" and job["progress"]["done"] == 2, job

    other = {TENANT_HEADER: f"{platform.tenant}-other"}
    assert (await client.get(f"/v1/audit/replay/{job['id']}", headers=other)).status_code == 404
    missing = await client.post(
        "/v1/audit/replay", json={"question_id": "nope", "judge": "buffer"}, headers=other
    )
    assert missing.status_code == 404 and missing.json()["error"]["field"] == "question_id"


async def test_bad_replay_requests_are_4xx(platform: Platform) -> None:
    client = platform.client
    response = await client.post("/v1/audit/replay", json={})
    assert response.status_code == 422
    response = await client.post("/v1/audit/replay", json={"question_id": "q", "judge": "x"})
    assert response.status_code == 422 and response.json()["error"]["field"] == "judge"
    response = await client.get("/v1/audit/replay/not-a-job")
    assert response.status_code == 404


async def test_rubric_history_and_its_jsonl_export(platform: Platform) -> None:
    client = platform.client
    question = f"Which sources? {uuid.uuid4().hex}"
    scored = await client.post("/v1/stagewise/score", json=group(question, step=5))
    assert scored.status_code == 200, scored.text
    question_id = scored.json()["question_id"]
    generated = {r["id"] for rs in scored.json()["rubrics"].values() for r in rs}

    history = await client.get(f"/v1/buffers/{question_id}/history")
    assert history.status_code == 200, history.text
    entries = history.json()["rubrics"]
    assert {e["id"] for e in entries} == generated
    assert all(e["added_step"] == 5 and e["origin"] == "active" for e in entries)

    export = await client.get("/v1/audit/rubric-history")
    assert export.status_code == 200
    assert export.headers["content-type"].startswith("application/x-ndjson")
    lines = [json.loads(line) for line in export.text.splitlines()]
    assert {(e["question_id"], e["id"]) for e in lines} >= {(question_id, i) for i in generated}

    other = {TENANT_HEADER: f"{platform.tenant}-other"}
    missing = await client.get(f"/v1/buffers/{question_id}/history", headers=other)
    assert missing.status_code == 404
    assert (await client.get("/v1/audit/rubric-history", headers=other)).text == ""
