"""The gateway's mining routes: corpora, mining jobs and mined nuggets, served by the miner.

Each is a pure proxy route: it forwards to the miner's route of the same name
(`mining.miner.endpoints`) for the caller's tenant (`common.forward.Forwarder`), and the
miner's errors pass on with their status, type and field (an `UpstreamError` is mapped once
for the app). Only GETs are retried: a POST creates or cancels a job and must not run twice.
"""

from typing import Annotated

from fastapi import APIRouter, Depends, Request, status

from rubricate.common.errors import ServiceError
from rubricate.common.forward import Forwarder
from rubricate.common.tenancy import TenantDep
from rubricate.common.upstream import ServiceClient, Upstreams
from rubricate.mining.miner import endpoints as miner
from rubricate.mining.miner.endpoints import (
    JOBS_LIMIT_DEFAULT,
    CorpusQuery,
    JobsLimitQuery,
    JobStateQuery,
    QuestionQuery,
)
from rubricate_client.endpoints import (
    CANCEL_JOB,
    CORPORA_INGEST,
    CORPORA_LIST,
    GET_JOB,
    JOBS_LIST,
    MINED_NUGGETS,
    NUGGETS_MINE,
)
from rubricate_client.schemas import mining

STATE_NAME = "upstreams"
"""The gateway's upstream clients on `app.state` (built in its lifespan); the miner's is used."""

router = APIRouter(tags=["mining"])


def miner_client(request: Request) -> ServiceClient:
    """The miner's client; a 503 when the gateway has no miner configured."""
    upstreams: Upstreams = getattr(request.app.state, STATE_NAME)
    if upstreams.miner is None:
        raise ServiceError(503, "no miner is configured", type="upstream_unreachable")
    return upstreams.miner


def miner_forwarder(
    client: Annotated[ServiceClient, Depends(miner_client)], tenant: TenantDep = "default"
) -> Forwarder:
    return Forwarder(client, tenant)


MinerDep = Annotated[Forwarder, Depends(miner_forwarder)]


@router.post(
    CORPORA_INGEST.path,
    response_model=mining.JobView,
    status_code=status.HTTP_202_ACCEPTED,
    summary="Ingest documents into a corpus (created if new) as a job with progress",
)
async def ingest(body: mining.IngestRequest, upstream: MinerDep) -> mining.JobView:
    sent = body.model_dump(mode="json", exclude_none=True)
    return await upstream(miner.INGEST, body=sent, retry=False)


@router.get(CORPORA_LIST.path, response_model=mining.CorpusList, summary="The tenant's corpora")
async def corpora(upstream: MinerDep) -> mining.CorpusList:
    return await upstream(miner.CORPORA)


@router.post(
    NUGGETS_MINE.path,
    response_model=mining.JobView,
    status_code=status.HTTP_202_ACCEPTED,
    summary="Mine a question's nuggets from a corpus (Search-Gen-V §3.2) as a job",
)
async def mine(body: mining.MineRequest, upstream: MinerDep) -> mining.JobView:
    sent = body.model_dump(mode="json", exclude_none=True)
    return await upstream(miner.MINE, body=sent, retry=False)


@router.get(
    JOBS_LIST.path, response_model=mining.JobList, summary="The tenant's jobs, newest first"
)
async def jobs(
    upstream: MinerDep, state: JobStateQuery = None, limit: JobsLimitQuery = JOBS_LIMIT_DEFAULT
) -> mining.JobList:
    return await upstream(miner.JOBS, query={"limit": limit, "state": state})


@router.get(
    GET_JOB.path, response_model=mining.JobView, summary="A job's state, progress and result"
)
async def job(job_id: str, upstream: MinerDep) -> mining.JobView:
    return await upstream(miner.JOB, path={"job_id": job_id})


@router.post(CANCEL_JOB.path, response_model=mining.JobView, summary="Cancel a job")
async def cancel(job_id: str, upstream: MinerDep) -> mining.JobView:
    return await upstream(miner.JOB_CANCEL, path={"job_id": job_id}, retry=False)


@router.get(
    MINED_NUGGETS.path,
    response_model=mining.NuggetsView,
    summary="The nuggets mined for a question, with provenance (passage ids, query path)",
)
async def nuggets(
    upstream: MinerDep, question: QuestionQuery, corpus: CorpusQuery = None
) -> mining.NuggetsView:
    return await upstream(miner.NUGGETS, query={"question": question, "corpus": corpus or None})
