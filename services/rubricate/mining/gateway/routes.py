"""The gateway's mining routes: corpora, mining jobs and mined nuggets, served by the miner.

Each is a pure proxy route: it forwards to the miner's route of the same name
(`mining.miner.endpoints`) for the caller's tenant (`common.forward.Forwarder`), and the
miner's errors pass on with their status, type and field (an `UpstreamError` is mapped once
for the app). Only GETs are retried: a POST creates or cancels a job and must not run twice.
"""

from typing import Any

from fastapi import APIRouter, status
from pydantic import BaseModel

from rubricate.common.forward import Forwarder, MinerDep
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
    Endpoint,
)
from rubricate_client.schemas import mining

router = APIRouter(tags=["mining"])


@router.post(
    CORPORA_INGEST.path,
    response_model=mining.JobView,
    status_code=status.HTTP_202_ACCEPTED,
    summary="Ingest documents into a corpus (created if new) as a job with progress",
)
async def ingest(body: mining.IngestRequest, upstream: MinerDep) -> mining.JobView:
    return await _start_job(upstream, miner.INGEST, body)


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
    return await _start_job(upstream, miner.MINE, body)


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


async def _start_job(
    upstream: Forwarder, endpoint: Endpoint[Any, mining.JobView], body: BaseModel
) -> mining.JobView:
    """Start a miner job with `body` (its unset fields left out), sent once: a second POST
    would start a second job."""
    sent = body.model_dump(mode="json", exclude_none=True)
    return await upstream(endpoint, body=sent, retry=False)
