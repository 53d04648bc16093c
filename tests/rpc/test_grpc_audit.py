"""The reward audit over gRPC (`Audit` service, `Stagewise/GetBufferHistory`) against its
HTTP API: every service in process (Celery eager, the miner on PostgreSQL), the fake judge as
the live judge and the planted honest reference judge (a fake) re-scoring the audited groups.
Both transports of the SDK must give the same results, the same errors, and the caller's
tenant only."""

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from rubricate.audit.miner.repository import AuditRepository
from rubricate.audit.miner.runner import AuditRuntime
from rubricate.miner import tasks
from rubricate.testing.fake_judge import FakeJudgeBackend
from rubricate_client import APIError, AsyncClient, AsyncGrpcClient, RetryPolicy
from rubricate_client.api import AsyncAPI
from rubricate_client.grpc_status import grpc_code
from rubricate_client.schemas.audit import AuditView, ReplayJob
from tests.audit.planted import judge
from tests.support.gateway import trajectory
from tests.support.miner import Platform, embedded

NO_RETRY = RetryPolicy(max_retries=0)


@pytest.fixture
def honest_reference(pg_engine: Engine) -> Iterator[None]:
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
    tmp_path: Path, pg_url: str, tenant: str, honest_reference: None
) -> AsyncIterator[Platform]:
    async with embedded(tmp_path, pg_url, tenant, FakeJudgeBackend()) as p:
        yield p


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


async def audited(client: AsyncAPI, scoring_id: str, wanted: str) -> AuditView:
    deadline = time.monotonic() + 60
    while True:
        try:
            audit = await client.get_audit(scoring_id)
            if audit.status == wanted:
                return audit
        except APIError as exc:  # the hand-over runs after the trainer's answer
            assert exc.status == 404, exc
        assert time.monotonic() < deadline, f"{scoring_id} never {wanted}"
        await asyncio.sleep(0.05)


async def finished(client: AsyncAPI, job_id: str) -> ReplayJob:
    deadline = time.monotonic() + 60
    while True:
        job = await client.get_replay_job(job_id)
        if job.state in ("succeeded", "failed"):
            return job
        assert time.monotonic() < deadline, job
        await asyncio.sleep(0.05)


def dumped(model: Any) -> Any:
    return model.model_dump(mode="json")


async def test_the_audit_operations_over_grpc_match_http(platform: Platform) -> None:
    urls = platform.platform.urls
    async with (
        AsyncGrpcClient(urls["gateway-grpc"], tenant=platform.tenant, retry=NO_RETRY) as rpc,
        AsyncClient(urls["gateway"], tenant=platform.tenant, retry=NO_RETRY) as http,
    ):
        settings = await rpc.set_audit_settings({"fraction": 0.0, "retention_days": 3})
        assert (settings.fraction, settings.retention_days) == (0.0, 3)
        assert await http.get_audit_settings() == settings == await rpc.get_audit_settings()

        question = f"Which sources? {uuid.uuid4().hex}"
        first = await rpc.score_stagewise(group(question, step=0))
        second = await rpc.score_stagewise(group(question, step=1))
        assert first.scoring_id is not None and second.scoring_id is not None
        question_id = first.question_id

        done = await audited(rpc, first.scoring_id, "done")
        assert done.reason == "first" and done.result is not None
        assert done.result.reference_model == "planted"
        # the live fake scores a 2 and c 0, the honest reference scores every rubric 1
        assert done.result.rollout_deltas["a"] < 0 < done.result.rollout_deltas["c"]
        assert dumped(done) == dumped(await http.get_audit(first.scoring_id))
        skipped = await audited(rpc, second.scoring_id, "skipped")
        assert skipped.result is None

        listed = await rpc.list_audits(question_id=question_id, limit=5)
        assert [a.scoring_id for a in listed.audits] == [first.scoring_id]
        assert dumped(listed) == dumped(await http.list_audits(question_id=question_id, limit=5))
        assert (await rpc.list_audits(question_id=f"{question_id}-none")).audits == []

        signals = await rpc.audit_signals(question_id=question_id)
        assert [(s.step, s.groups, s.audited) for s in signals.steps] == [(0, 1, 1), (1, 1, 0)]
        assert signals.question_id == question_id
        assert dumped(signals) == dumped(await http.audit_signals(question_id=question_id))
        assert dumped(await rpc.audit_signals()) == dumped(await http.audit_signals())

        history = await rpc.get_buffer_history(question_id)
        generated = {r.id for rs in first.rubrics.values() for r in rs}
        entries = {e.id: e for e in history.rubrics}
        assert generated and set(entries) >= generated
        assert {entries[i].added_step for i in generated} == {0}  # the first group's step
        assert dumped(history) == dumped(await http.get_buffer_history(question_id))

        started = await rpc.replay({"question_id": question_id, "judge": "live"})
        assert started.judge == "live" and started.state in ("queued", "running", "succeeded")
        job = await finished(rpc, started.id)
        assert job.state == "succeeded", job
        assert (job.progress.total, job.progress.done) == (2, 2)
        assert job.result is not None and job.result.agreement == 1.0  # deterministic fake
        assert dumped(job) == dumped(await http.get_replay_job(started.id))

        assert (await rpc.delete_audits(question_id=question_id)).deleted == 2
        with pytest.raises(APIError) as gone:
            await rpc.get_audit(first.scoring_id)
        assert gone.value.status == 404 and gone.value.grpc_code == "NOT_FOUND"


async def test_audit_errors_over_grpc_are_those_of_http(platform: Platform) -> None:
    urls = platform.platform.urls
    cases: list[tuple[str, dict[str, Any], int, str | None]] = [
        ("list_audits", {"limit": 0}, 422, "limit"),  # a query parameter, checked by the gateway
        ("get_audit", {"scoring_id": "not an id"}, 422, "scoring_id"),
        ("get_replay_job", {"job_id": "not-a-job"}, 404, None),
        ("replay", {"request": {"question_id": "nope", "judge": "buffer"}}, 404, "question_id"),
    ]
    async with (
        AsyncGrpcClient(urls["gateway-grpc"], tenant=platform.tenant, retry=NO_RETRY) as rpc,
        AsyncClient(urls["gateway"], tenant=platform.tenant, retry=NO_RETRY) as http,
    ):
        for method, kwargs, status, field in cases:
            errors: list[APIError] = []
            for client in (http, rpc):
                with pytest.raises(APIError) as caught:
                    await getattr(client, method)(**kwargs)
                errors.append(caught.value)
            over_http, over_grpc = errors
            assert over_http.status == over_grpc.status == status, (method, over_http)
            assert over_grpc.grpc_code == grpc_code(status).name
            assert over_http.error is not None and over_grpc.error is not None
            assert over_grpc.error.field == over_http.error.field == field, method
            assert over_grpc.error.type == over_http.error.type, method


async def test_an_audit_read_over_grpc_sees_the_callers_tenant_only(platform: Platform) -> None:
    urls = platform.platform.urls
    other_tenant = f"{platform.tenant}-other"
    async with (
        AsyncGrpcClient(urls["gateway-grpc"], tenant=platform.tenant, retry=NO_RETRY) as rpc,
        AsyncGrpcClient(urls["gateway-grpc"], tenant=other_tenant, retry=NO_RETRY) as other,
    ):
        scored = await rpc.score_stagewise(group(f"Which one? {uuid.uuid4().hex}", step=0))
        assert scored.scoring_id is not None
        await audited(rpc, scored.scoring_id, "done")

        with pytest.raises(APIError) as hidden:
            await other.get_audit(scored.scoring_id)
        assert hidden.value.status == 404 and hidden.value.grpc_code == "NOT_FOUND"
        assert (await other.list_audits()).audits == []
        assert (await other.audit_signals()).steps == []
        with pytest.raises(APIError) as no_history:
            await other.get_buffer_history(scored.question_id)
        assert no_history.value.status == 404
        assert (await other.delete_audits()).deleted == 0
        # still there for its own tenant
        assert (await rpc.get_audit(scored.scoring_id)).status == "done"
