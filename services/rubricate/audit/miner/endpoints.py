"""The miner's audit routes as typed endpoint values, declared once: the miner's route
decorators take their paths from here; the gateway submits scored groups and flagged
requests to them (`AuditSubmitter`) and forwards its public audit routes to them
(`common.forward.Forwarder`, path segments escaped by `Endpoint.url_path`). The query
parameters both sides check are declared here too, so the gateway and the miner validate
the same bounds."""

from typing import Annotated

from fastapi import Path, Query

from rubricate.audit.miner.schemas import (
    QUESTION_IDS_TEXT_LEN,
    AddressingReportIn,
    AuditSubmission,
    Recorded,
    ReplayIn,
    Submitted,
)
from rubricate.common.endpoints import delete, get, post, put
from rubricate.db.limits import QUESTION_ID_LEN
from rubricate_client.schemas import audit

AUDITS_LIMIT_MAX = 1000
AUDITS_LIMIT_DEFAULT = 100
"""The page size of the latest audited groups."""
REPLAY_JOBS_LIMIT_MAX = 200
REPLAY_JOBS_LIMIT_DEFAULT = 50
"""The replay job list's page size."""

QuestionQuery = Annotated[str | None, Query(min_length=1, max_length=QUESTION_ID_LEN)]
QuestionIdsQuery = Annotated[str, Query(min_length=1, max_length=QUESTION_IDS_TEXT_LEN)]
AuditsLimitQuery = Annotated[int, Query(ge=1, le=AUDITS_LIMIT_MAX)]
ReplayJobsLimitQuery = Annotated[int, Query(ge=1, le=REPLAY_JOBS_LIMIT_MAX)]
ReplayJobPath = Annotated[str, Path(min_length=1, max_length=36)]

SUBMIT = post("miner_audit_submit", "/v1/audit/groups", AuditSubmission, Submitted)
"""Take a scored group; queue it for the reference judge when it is sampled."""

ADDRESSING = post("miner_audit_addressing", "/v1/audit/addressing", AddressingReportIn, Recorded)
"""Take a request of another judge kind in which something addressed the judge."""

GROUPS = get("miner_audit_groups", "/v1/audit/groups", audit.AuditList, "question_id", "limit")
GROUP = get("miner_audit_group", "/v1/audit/groups/{scoring_id}", audit.AuditView)
TRAJECTORIES = get(
    "miner_audit_trajectories",
    "/v1/audit/groups/{scoring_id}/trajectories",
    audit.ScoringTrajectories,
)
QUESTIONS = get(
    "miner_audit_questions", "/v1/audit/questions", audit.QuestionAuditList, "question_ids"
)
DELETE = delete("miner_audit_delete", "/v1/audit/groups", audit.AuditDeleted, "question_id")
SIGNALS = get("miner_audit_signals", "/v1/audit/signals", audit.AuditSignals, "question_id")
SETTINGS = get("miner_audit_settings", "/v1/audit/settings", audit.AuditTenantSettings)
SETTINGS_PUT = put(
    "miner_audit_settings_put",
    "/v1/audit/settings",
    audit.AuditTenantSettings,
    audit.AuditTenantSettings,
)
REPLAY = post("miner_audit_replay", "/v1/audit/replay", ReplayIn, audit.ReplayJob)
REPLAY_JOBS = get("miner_audit_replay_jobs", "/v1/audit/replay", audit.ReplayJobList, "limit")
REPLAY_JOB = get("miner_audit_replay_job", "/v1/audit/replay/{job_id}", audit.ReplayJob)
