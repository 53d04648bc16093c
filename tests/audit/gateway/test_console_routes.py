"""The console's audit reads through the public API, every service in process (the miner on
PostgreSQL, the planted honest reference judge, a fake): audit status per question, the
kept trajectories of a scoring, the replay job list; tenant isolation; and the gateway with
no miner configured."""

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import Engine

from rubricate.audit.gateway import routes as audit_routes
from rubricate.audit.miner.repository import AuditRepository
from rubricate.audit.miner.runner import AuditRuntime
from rubricate.common.app import create_service_app
from rubricate.common.tenancy import TENANT_HEADER
from rubricate.common.upstream import ServiceClient, Upstreams
from rubricate.miner import tasks
from rubricate.testing.fake_judge import FakeJudgeBackend
from rubricate_client.endpoints import AUDIT_QUESTIONS, AUDIT_REPLAY_JOBS, AUDIT_TRAJECTORIES
from tests.audit.planted import judge
from tests.support.gateway import trajectory
from tests.support.miner import Platform, embedded


@pytest.fixture
def reference(pg_engine: Engine) -> Iterator[None]:
    tasks.configure_audit_runtime(
        AuditRuntime(
            repo=AuditRepository(pg_engine),
            judge=judge(gamed=False),
            model="planted",
            design="generate",
        )
    )
    try:
        yield
    finally:
        tasks.configure_audit_runtime(None)


@pytest.fixture
async def platform(
    tmp_path: Path, pg_url: str, tenant: str, reference: None
) -> AsyncIterator[Platform]:
    async with embedded(tmp_path, pg_url, tenant, FakeJudgeBackend()) as p:
        yield p


TEXTS = {
    "a": trajectory("[[excellent]]"),
    "b": trajectory("plain"),
    "c": trajectory("[[poor]]"),
}


def group(question_id: str, *, step: int) -> dict[str, Any]:
    return {
        "question": f"Which sources? ({question_id})",
        "question_id": question_id,
        "step": step,
        "rollouts": [{"id": rid, "trajectory": text} for rid, text in TEXTS.items()],
    }


async def scored(client: httpx.AsyncClient, question_id: str, *, step: int) -> str:
    response = await client.post("/v1/stagewise/score", json=group(question_id, step=step))
    assert response.status_code == 200, response.text
    scoring_id: str = response.json()["scoring_id"]
    return scoring_id


async def settled(client: httpx.AsyncClient, scoring_id: str) -> dict[str, Any]:
    """The audit record once it is no longer pending."""
    deadline = time.monotonic() + 60
    while True:
        response = await client.get(f"/v1/audit/groups/{scoring_id}")
        if response.status_code == 200 and response.json()["status"] != "pending":
            found: dict[str, Any] = response.json()
            return found
        assert time.monotonic() < deadline, response.text
        await asyncio.sleep(0.05)


async def test_question_status_trajectories_and_replay_jobs(platform: Platform) -> None:
    client = platform.client
    other = {TENANT_HEADER: f"{platform.tenant}-other"}
    put = await client.put("/v1/audit/settings", json={"fraction": 0.0})
    assert put.status_code == 200, put.text
    q1, q2 = f"q1-{uuid.uuid4().hex[:8]}", f"q2-{uuid.uuid4().hex[:8]}"
    first = await scored(client, q1, step=0)  # the question's first group: audited
    second = await scored(client, q1, step=1)  # not sampled
    # its own step: within step 0 a second question's first group is over the audit's
    # share (at most max(max_share, fraction) of a step's groups, at least one)
    third = await scored(client, q2, step=2)
    audited = await settled(client, first)
    assert audited["status"] == "done", audited
    assert (await settled(client, second))["status"] == "skipped"
    assert (await settled(client, third))["status"] == "done"

    # audit status per question, in the order asked; a question without records is absent
    response = await client.get(
        AUDIT_QUESTIONS.path, params={"question_ids": f"{q2},nothing-here,{q1}"}
    )
    assert response.status_code == 200, response.text
    q2_status, q1_status = response.json()["questions"]
    assert q1_status == {
        "question_id": q1,
        "groups": 2,
        "done": 1,
        "failed": 0,
        "pending": 0,
        "last_agreement": pytest.approx(audited["result"]["agreement"]),
        "last_audited_at": audited["finished_at"],
    }
    assert q2_status["question_id"] == q2 and q2_status["groups"] == 1
    other_view = await client.get(
        AUDIT_QUESTIONS.path, params={"question_ids": f"{q1},{q2}"}, headers=other
    )
    assert other_view.json() == {"questions": []}

    # the trajectories kept with a scoring (the default retention keeps them)
    path = AUDIT_TRAJECTORIES.path.format(scoring_id=second)
    response = await client.get(path)
    assert response.status_code == 200, response.text
    assert response.json() == {"scoring_id": second, "question_id": q1, "trajectories": TEXTS}
    missing = await client.get(path, headers=other)
    assert missing.status_code == 404 and missing.json()["error"]["type"] == "not_found"
    unknown = await client.get(AUDIT_TRAJECTORIES.path.format(scoring_id="sc_unknown"))
    assert unknown.status_code == 404

    # replay jobs, newest first
    job_ids = []
    for judge_name in ("reference", "live"):
        response = await client.post(
            "/v1/audit/replay", json={"question_id": q1, "judge": judge_name}
        )
        assert response.status_code == 202, response.text
        job_ids.append(response.json()["id"])
    listed = await client.get(AUDIT_REPLAY_JOBS.path)
    assert listed.status_code == 200, listed.text
    jobs = listed.json()["jobs"]
    assert [j["id"] for j in jobs] == job_ids[::-1]
    assert [j["judge"] for j in jobs] == ["live", "reference"]
    assert all(j["result"] is None for j in jobs)  # read one job for its result
    limited = await client.get(AUDIT_REPLAY_JOBS.path, params={"limit": 1})
    assert [j["id"] for j in limited.json()["jobs"]] == job_ids[1:]
    assert (await client.get(AUDIT_REPLAY_JOBS.path, headers=other)).json() == {"jobs": []}


async def test_bad_console_queries_are_422_naming_the_field(platform: Platform) -> None:
    client = platform.client
    too_many = ",".join(f"q{i}" for i in range(201))
    for params in ({}, {"question_ids": ""}, {"question_ids": "a,,b"}, {"question_ids": too_many}):
        response = await client.get(AUDIT_QUESTIONS.path, params=params)
        assert response.status_code == 422, (params, response.text)
        assert response.json()["error"]["field"] == "question_ids"
    for limit in (0, 201, "x"):
        response = await client.get(AUDIT_REPLAY_JOBS.path, params={"limit": limit})
        assert response.status_code == 422
        assert response.json()["error"]["field"] == "limit"
    response = await client.get(AUDIT_TRAJECTORIES.path.format(scoring_id="not%20an%20id"))
    assert response.status_code == 422

    # the miner checks the same itself
    miner = platform.platform.urls["miner"]
    async with httpx.AsyncClient(base_url=miner, headers=client.headers) as direct:
        response = await direct.get(AUDIT_QUESTIONS.path, params={"question_ids": too_many})
        assert response.status_code == 422
        assert response.json()["error"]["field"] == "question_ids"
        response = await direct.get(AUDIT_REPLAY_JOBS.path, params={"limit": 201})
        assert response.status_code == 422


def gateway_without_miner() -> FastAPI:
    app = create_service_app(service="gateway", title="gateway", routers=[audit_routes.router])
    unused = ServiceClient(service="store", base_url="http://127.0.0.1:9", timeout_s=1, retries=0)
    app.state.upstreams = Upstreams(generator=unused, verifier=unused, store=unused, miner=None)
    return app


async def test_without_a_miner_the_console_reads_are_503() -> None:
    transport = httpx.ASGITransport(app=gateway_without_miner())
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as client:
        for path, params in (
            (AUDIT_QUESTIONS.path, {"question_ids": "q"}),
            (AUDIT_REPLAY_JOBS.path, {}),
            (AUDIT_TRAJECTORIES.path.format(scoring_id="sc_1"), {}),
        ):
            response = await client.get(path, params=params)
            assert response.status_code == 503, (path, response.text)
            assert response.json()["error"]["type"] == "upstream_unreachable"
