"""The SDK's typed audit methods over HTTP (the sync client; the async client and gRPC are in
tests/rpc/test_grpc_audit.py): every service in process (Celery eager, the miner on
PostgreSQL), the fake judge as the live judge, the planted honest reference judge (a fake)."""

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from rubricate.audit.miner.repository import AuditRepository
from rubricate.audit.miner.runner import AuditRuntime
from rubricate.miner import tasks
from rubricate.testing.fake_judge import FakeJudgeBackend
from rubricate_client import APIError, Client, RetryPolicy
from rubricate_client.endpoints import AUDIT_LIST, AUDIT_SIGNALS, BUFFER_HISTORY
from rubricate_client.schemas.audit import AuditTenantSettings, ReplayRequest
from tests.audit.planted import judge
from tests.support.gateway import trajectory
from tests.support.miner import Platform, embedded


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


def test_query_parameters_go_into_the_url_when_given() -> None:
    assert AUDIT_LIST.url_path({}) == "/v1/audit/groups"
    assert (
        AUDIT_LIST.url_path({"question_id": "q 1/2", "limit": "5"})
        == "/v1/audit/groups?question_id=q+1%2F2&limit=5"
    )
    assert AUDIT_SIGNALS.url_path({"limit": "5"}) == "/v1/audit/signals"  # not its parameter
    assert BUFFER_HISTORY.url_path({"question_id": "q?1"}) == "/v1/buffers/q%3F1/history"


def run_audit_session(url: str, tenant: str) -> None:
    """A trainer's audit session with the sync client: settings, scoring, reads, replay."""
    with Client(url, tenant=tenant, retry=RetryPolicy(max_retries=0)) as client:
        settings = client.set_audit_settings(AuditTenantSettings(fraction=0.0))
        assert (settings.fraction, settings.retention_days) == (0.0, None)
        assert client.get_audit_settings() == settings

        question = f"Which sources? {uuid.uuid4().hex}"
        rollouts = [
            {"id": "a", "trajectory": trajectory("[[excellent]]")},
            {"id": "c", "trajectory": trajectory("[[poor]]")},
        ]
        scored = client.score_stagewise({"question": question, "step": 4, "rollouts": rollouts})
        assert scored.scoring_id is not None
        deadline = time.monotonic() + 60
        while True:  # the hand-over and the audit run after the trainer's answer
            try:
                audit = client.get_audit(scored.scoring_id)
                if audit.status == "done":
                    break
            except APIError as exc:
                assert exc.status == 404, exc
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert audit.result is not None and audit.result.reference_model == "planted"
        assert audit.result.rollout_deltas["a"] < 0 < audit.result.rollout_deltas["c"]

        assert [a.scoring_id for a in client.list_audits(limit=1).audits] == [scored.scoring_id]
        assert client.list_audits(question_id="another-question").audits == []
        signals = client.audit_signals(question_id=scored.question_id)
        assert [(s.step, s.audited) for s in signals.steps] == [(4, 1)]

        history = client.get_buffer_history(scored.question_id)
        assert history.question_id == scored.question_id
        assert {e.id for e in history.rubrics} == {
            r.id for rs in scored.rubrics.values() for r in rs
        }

        job = client.replay(ReplayRequest(scoring_ids=[scored.scoring_id], judge="reference"))
        while job.state not in ("succeeded", "failed"):
            assert time.monotonic() < deadline + 60
            time.sleep(0.05)
            job = client.get_replay_job(job.id)
        assert job.state == "succeeded" and job.judge == "reference"
        assert job.result is not None and [g.scoring_id for g in job.result.groups] == [
            scored.scoring_id
        ]
        assert job.result.groups[0].agreement == audit.result.agreement  # same reference

        assert client.delete_audits(question_id="another-question").deleted == 0
        assert client.delete_audits().deleted == 1
        assert client.list_audits().audits == []


async def test_the_typed_audit_methods_over_http(platform: Platform) -> None:
    await asyncio.to_thread(run_audit_session, platform.platform.urls["gateway"], platform.tenant)
