"""The tenant's job list (the console's jobs page) on real PostgreSQL: the repository, and
the route through the gateway with every service in process. Jobs are recorded with the
repository (no corpus is ingested) and each ends finished or cancelled, so no later
platform start picks them up."""

from collections.abc import Iterator
from datetime import timedelta

import httpx
import pytest
from sqlalchemy import Engine, update

from rubricate.common.tenancy import TENANT_HEADER
from rubricate.db.base import utcnow
from rubricate.db.engine import unit_of_work
from rubricate.mining.miner.models import JobRow
from rubricate.mining.miner.repository import JobSnapshot, MinerRepository
from rubricate_client.endpoints import JOBS_LIST
from tests.support.miner import Platform

TREE = {"nodes": ["a large search tree the list never loads"]}


class Jobs:
    """A tenant's jobs, one minute apart, the newest last; queued ones are cancelled at the
    end."""

    def __init__(self, repo: MinerRepository, tenant: str) -> None:
        self.repo = repo
        self.tenant = tenant
        self.created: list[JobSnapshot] = []

    def add(self, kind: str = "mine", *, state: str = "succeeded") -> str:
        job = self.repo.create_job(
            tenant=self.tenant,
            kind="mine" if kind == "mine" else "ingest",
            corpus="docs",
            question="How do I encode JSON?" if kind == "mine" else None,
            params={"max_nodes": 4} if kind == "mine" else {"documents": [{"id": "a"}]},
            progress={"phase": "search"},
            tree=TREE if kind == "mine" else None,
        )
        if state in ("succeeded", "failed", "running"):
            assert self.repo.claim(job.id, worker="test", lease_s=600) is not None
        if state in ("succeeded", "failed"):
            assert self.repo.finish(
                job.id,
                worker="test",
                state="succeeded" if state == "succeeded" else "failed",
                result={"nuggets": []} if state == "succeeded" else None,
                error="planted failure" if state == "failed" else None,
            )
        if state == "cancelled":
            self.repo.request_cancel(job.id)
        self.created.append(job)
        with unit_of_work(self.repo.engine, write=True) as session:
            for age, created in enumerate(reversed(self.created)):
                session.execute(
                    update(JobRow)
                    .where(JobRow.id == created.id)
                    .values(created_at=utcnow() - timedelta(minutes=age))
                )
        return job.id

    def close(self) -> None:
        for job in self.created:
            found = self.repo.get_job(job.id)
            if found is not None and found.state == "running":
                self.repo.finish(job.id, worker="test", state="cancelled")
            else:
                self.repo.request_cancel(job.id)


@pytest.fixture
def jobs(pg_engine: Engine, tenant: str) -> Iterator[Jobs]:
    made = Jobs(MinerRepository(pg_engine), tenant)
    try:
        yield made
    finally:
        made.close()


def test_the_list_is_newest_first_filtered_and_limited(jobs: Jobs, tenant: str) -> None:
    ids = [
        jobs.add("ingest"),
        jobs.add("mine", state="failed"),
        jobs.add("mine", state="queued"),
        jobs.add("mine"),
        jobs.add("mine", state="running"),
    ]
    repo = jobs.repo
    listed = repo.list_jobs(tenant)
    assert [j.id for j in listed] == ids[::-1]
    assert [j.kind for j in listed] == ["mine", "mine", "mine", "mine", "ingest"]
    assert all(j.tree is None for j in listed)  # never loaded for a list
    stored = repo.get_job(ids[3])
    assert stored is not None and stored.tree == TREE  # the tree itself is kept
    assert [j.id for j in repo.list_jobs(tenant, limit=2)] == [ids[4], ids[3]]
    assert [j.id for j in repo.list_jobs(tenant, state="succeeded")] == [ids[3], ids[0]]
    assert [j.id for j in repo.list_jobs(tenant, state="queued")] == [ids[2]]
    assert [j.id for j in repo.list_jobs(tenant, state="running")] == [ids[4]]
    assert repo.list_jobs(tenant, state="cancelled") == []
    assert repo.list_jobs(f"{tenant}-b") == []


async def test_the_job_list_through_the_gateway(running: Platform, jobs: Jobs) -> None:
    client = running.client
    assert (await client.get(JOBS_LIST.path)).json() == {"jobs": []}
    ids = [
        jobs.add("ingest"),
        jobs.add("mine", state="failed"),
        jobs.add("mine", state="cancelled"),
        jobs.add("mine"),
    ]
    response = await client.get(JOBS_LIST.path)
    assert response.status_code == 200, response.text
    listed = response.json()["jobs"]
    assert [j["id"] for j in listed] == ids[::-1]
    newest, cancelled, failed, ingest = listed
    assert newest["state"] == "succeeded" and newest["result"] == {"nuggets": []}
    assert newest["question"] == "How do I encode JSON?" and newest["params"] == {"max_nodes": 4}
    assert cancelled["state"] == "cancelled" and cancelled["cancel_requested"] is True
    assert failed["error"] == "planted failure" and failed["attempts"] == 1
    # an ingestion job shows its document count, not the documents
    assert ingest["kind"] == "ingest" and ingest["params"] == {"documents": 1}

    filtered = await client.get(JOBS_LIST.path, params={"state": "failed", "limit": 10})
    assert [j["id"] for j in filtered.json()["jobs"]] == [ids[1]]
    limited = await client.get(JOBS_LIST.path, params={"limit": 2})
    assert [j["id"] for j in limited.json()["jobs"]] == [ids[3], ids[2]]
    other = await client.get(JOBS_LIST.path, headers={TENANT_HEADER: f"{running.tenant}-b"})
    assert other.json() == {"jobs": []}

    for params in ({"state": "done"}, {"limit": 0}, {"limit": 201}, {"limit": "x"}):
        response = await client.get(JOBS_LIST.path, params=params)
        assert response.status_code == 422, (params, response.text)
        assert response.json()["error"]["field"] == next(iter(params))
    # the miner checks the same itself
    miner = running.platform.urls["miner"]
    async with httpx.AsyncClient(base_url=miner, headers=client.headers) as direct:
        response = await direct.get(JOBS_LIST.path, params={"state": "done"})
        assert response.status_code == 422
        assert response.json()["error"]["field"] == "state"
        response = await direct.get(JOBS_LIST.path)
        assert [j["id"] for j in response.json()["jobs"]] == ids[::-1]
