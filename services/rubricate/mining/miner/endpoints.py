"""The miner's mining routes as typed endpoint values, declared once: the miner's route
decorators take their paths from here, and the gateway forwards its public mining routes to
them (`common.forward.Forwarder`, path segments escaped by `Endpoint.url_path`). The query
parameters both sides check are declared here too, so the gateway and the miner validate
the same bounds."""

from typing import Annotated

from fastapi import Query

from rubricate.common.endpoints import get, post
from rubricate_client.endpoints import NoBody
from rubricate_client.schemas import mining

JOBS_LIMIT_MAX = 200
JOBS_LIMIT_DEFAULT = 50
"""The job list's page size."""

JobStateQuery = Annotated[mining.JobStateName | None, Query()]
JobsLimitQuery = Annotated[int, Query(ge=1, le=JOBS_LIMIT_MAX)]
QuestionQuery = Annotated[str, Query(min_length=1, max_length=4000)]
CorpusQuery = Annotated[str | None, Query(pattern=mining.CORPUS_PATTERN)]

INGEST = post("miner_ingest", "/v1/corpora", mining.IngestRequest, mining.JobView)
"""Ingest documents into a corpus (created if new) as a job."""

CORPORA = get("miner_corpora", "/v1/corpora", mining.CorpusList)
MINE = post("miner_mine", "/v1/nuggets/mine", mining.MineRequest, mining.JobView)
"""Mine a question's nuggets from a corpus as a job."""

JOBS = get("miner_jobs", "/v1/jobs", mining.JobList, "state", "limit")
JOB = get("miner_job", "/v1/jobs/{job_id}", mining.JobView)
JOB_CANCEL = post("miner_job_cancel", "/v1/jobs/{job_id}/cancel", NoBody, mining.JobView)
JOB_RESUME = post("miner_job_resume", "/v1/jobs/{job_id}/resume", NoBody, mining.JobView)
"""Re-run a failed job from its stored tree (the miner's own: the gateway does not serve it)."""

NUGGETS = get("miner_nuggets", "/v1/nuggets", mining.NuggetsView, "question", "corpus")
"""The nuggets mined for a question, with provenance."""
