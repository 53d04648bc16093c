"""The gateway's public API as data: each endpoint's HTTP route, gRPC method and models.

The Python SDK (HTTP and gRPC clients) and the gateway's gRPC server are both driven by this
table, and the gateway's route decorators take their paths from it (`@router.post(X.path)`),
so a new endpoint is one `Endpoint(...)` entry here, its messages in `proto/rubricate/v1/`,
and one typed method per SDK mixin (`rubricate_client.api`). A route's query parameters are
named in `query_params`: the SDK passes them with the path parameters (`path=`), and over
gRPC they are `optional` fields of the request message (unset: not sent). `HTTP_ONLY` holds
the public routes without a gRPC method (bank administration, snapshots, mined nuggets, the
JSONL exports).
"""

import re
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar
from urllib.parse import quote, urlencode

from pydantic import BaseModel

from rubricate_client.schemas.audit import (
    AuditDeleted,
    AuditList,
    AuditSignals,
    AuditTenantSettings,
    AuditView,
    QuestionAuditList,
    ReplayJob,
    ReplayJobList,
    ReplayRequest,
    RubricHistory,
    ScoringTrajectories,
)
from rubricate_client.schemas.auth import ScopedTokenRequest, ScopedTokenResponse
from rubricate_client.schemas.bank import (
    BankItemCurationResult,
    BankItemHistory,
    BankItemList,
    BankStats,
    RestoreRequest,
    RestoreResponse,
    RetrievedItem,
    SnapshotInfo,
    SnapshotList,
    SnapshotRequest,
)
from rubricate_client.schemas.buffers import BufferView, QuestionList, RubricCurationResult
from rubricate_client.schemas.curation import (
    BankItemCurationRequest,
    CurationList,
    RubricCurationRequest,
)
from rubricate_client.schemas.mining import (
    CorpusList,
    IngestRequest,
    JobList,
    JobView,
    MineRequest,
    NuggetsView,
)
from rubricate_client.schemas.nuggets import (
    NuggetVerifyBatchRequest,
    NuggetVerifyBatchResponse,
    NuggetVerifyRequest,
    NuggetVerifyResponse,
)
from rubricate_client.schemas.reflections import (
    BankRetrieveRequest,
    BankRetrieveResponse,
    ReflectionScoreRequest,
    ReflectionScoreResponse,
)
from rubricate_client.schemas.rewards import GetRewardRequest, GetRewardResponse
from rubricate_client.schemas.scorings import ScoringList, StoredScoring
from rubricate_client.schemas.stagewise import (
    AdvantagesRequest,
    AdvantagesResponse,
    StagewiseScoreRequest,
    StagewiseScoreResponse,
)
from rubricate_client.schemas.steps import (
    ListwiseRewardRequest,
    ListwiseRewardResponse,
    RankRequest,
    RankResponse,
    ScoreRequest,
    ScoreResponse,
    SegmentRequest,
    SegmentResponse,
    StepRubricRequest,
    StepRubricResponse,
    VerifyRequest,
    VerifyResponse,
)

ReqT = TypeVar("ReqT", bound=BaseModel)
RespT = TypeVar("RespT", bound=BaseModel)

PROTO_PACKAGE = "rubricate.v1"
_PATH_PARAM = re.compile(r"{([A-Za-z_][A-Za-z0-9_]*)}")


class NoBody(BaseModel):
    """The request model of an endpoint without a body (GET)."""


class JsonLines(BaseModel):
    """A body that is JSON Lines (an exported bank snapshot), not one JSON document."""


@dataclass(frozen=True)
class Endpoint(Generic[ReqT, RespT]):
    name: str
    method: Literal["GET", "POST", "PUT", "DELETE"]
    path: str
    """The route template, as registered in FastAPI (`/v1/buffers/{question_id}`)."""
    request: type[ReqT]
    response: type[RespT]
    rpc: tuple[str, str] | None
    """(service, method) in the `rubricate.v1` proto package, or None: HTTP only."""
    query_params: tuple[str, ...] = ()
    """Query parameters of the route; each one given is appended to the URL."""
    path_params: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "path_params", tuple(_PATH_PARAM.findall(self.path)))

    @property
    def has_body(self) -> bool:
        return self.request is not NoBody

    @property
    def grpc_path(self) -> str | None:
        """The gRPC method path, `/rubricate.v1.Stagewise/Score`."""
        if self.rpc is None:
            return None
        return f"/{PROTO_PACKAGE}.{self.rpc[0]}/{self.rpc[1]}"

    def url_path(self, path_params: dict[str, str]) -> str:
        missing = [p for p in self.path_params if p not in path_params]
        if missing:
            raise ValueError(f"{self.name}: missing path parameter(s) {missing}")
        url = _PATH_PARAM.sub(lambda m: _quote(path_params[m.group(1)]), self.path)
        query = [(q, path_params[q]) for q in self.query_params if q in path_params]
        return f"{url}?{urlencode(query)}" if query else url


def _quote(value: str) -> str:
    return quote(value, safe="")


STAGEWISE_SCORE = Endpoint(
    name="stagewise_score",
    method="POST",
    path="/v1/stagewise/score",
    request=StagewiseScoreRequest,
    response=StagewiseScoreResponse,
    rpc=("Stagewise", "Score"),
)
STAGEWISE_ADVANTAGES = Endpoint(
    name="stagewise_advantages",
    method="POST",
    path="/v1/advantages/stagewise",
    request=AdvantagesRequest,
    response=AdvantagesResponse,
    rpc=("Stagewise", "Advantages"),
)
GET_BUFFER = Endpoint(
    name="get_buffer",
    method="GET",
    path="/v1/buffers/{question_id}",
    request=NoBody,
    response=BufferView,
    rpc=("Stagewise", "GetBuffer"),
)
GET_REWARD = Endpoint(
    name="get_reward",
    method="POST",
    path="/get_reward",
    request=GetRewardRequest,
    response=GetRewardResponse,
    rpc=("Trainer", "GetReward"),
)

NUGGETS_VERIFY = Endpoint(
    name="nuggets_verify",
    method="POST",
    path="/v1/nuggets/verify",
    request=NuggetVerifyRequest,
    response=NuggetVerifyResponse,
    rpc=("Nuggets", "Verify"),
)
NUGGETS_VERIFY_BATCH = Endpoint(
    name="nuggets_verify_batch",
    method="POST",
    path="/v1/nuggets/verify-batch",
    request=NuggetVerifyBatchRequest,
    response=NuggetVerifyBatchResponse,
    rpc=("Nuggets", "VerifyBatch"),
)
STEPS_SEGMENT = Endpoint(
    name="steps_segment",
    method="POST",
    path="/v1/steps/segment",
    request=SegmentRequest,
    response=SegmentResponse,
    rpc=("Steps", "Segment"),
)
STEPS_RUBRIC = Endpoint(
    name="steps_rubric",
    method="POST",
    path="/v1/steps/rubric",
    request=StepRubricRequest,
    response=StepRubricResponse,
    rpc=("Steps", "Rubric"),
)
STEPS_VERIFY = Endpoint(
    name="steps_verify",
    method="POST",
    path="/v1/steps/verify",
    request=VerifyRequest,
    response=VerifyResponse,
    rpc=("Steps", "Verify"),
)
STEPS_SCORE = Endpoint(
    name="steps_score",
    method="POST",
    path="/v1/steps/score",
    request=ScoreRequest,
    response=ScoreResponse,
    rpc=("Steps", "Score"),
)
LISTWISE_REWARD = Endpoint(
    name="listwise_reward",
    method="POST",
    path="/v1/rubrics/listwise-reward",
    request=ListwiseRewardRequest,
    response=ListwiseRewardResponse,
    rpc=("Steps", "ListwiseReward"),
)
RANK = Endpoint(
    name="rank",
    method="POST",
    path="/v1/rank",
    request=RankRequest,
    response=RankResponse,
    rpc=("Steps", "Rank"),
)
REFLECTIONS_SCORE = Endpoint(
    name="reflections_score",
    method="POST",
    path="/v1/reflections/score",
    request=ReflectionScoreRequest,
    response=ReflectionScoreResponse,
    rpc=("Reflections", "Score"),
)
BANK_RETRIEVE = Endpoint(
    name="bank_retrieve",
    method="POST",
    path="/v1/bank/retrieve",
    request=BankRetrieveRequest,
    response=BankRetrieveResponse,
    rpc=("Bank", "Retrieve"),
)
CORPORA_INGEST = Endpoint(
    name="corpora_ingest",
    method="POST",
    path="/v1/corpora",
    request=IngestRequest,
    response=JobView,
    rpc=("Mining", "IngestCorpus"),
)
CORPORA_LIST = Endpoint(
    name="corpora_list",
    method="GET",
    path="/v1/corpora",
    request=NoBody,
    response=CorpusList,
    rpc=("Mining", "ListCorpora"),
)
NUGGETS_MINE = Endpoint(
    name="nuggets_mine",
    method="POST",
    path="/v1/nuggets/mine",
    request=MineRequest,
    response=JobView,
    rpc=("Mining", "Mine"),
)
GET_JOB = Endpoint(
    name="get_job",
    method="GET",
    path="/v1/jobs/{job_id}",
    request=NoBody,
    response=JobView,
    rpc=("Mining", "GetJob"),
)
CANCEL_JOB = Endpoint(
    name="cancel_job",
    method="POST",
    path="/v1/jobs/{job_id}/cancel",
    request=NoBody,
    response=JobView,
    rpc=("Mining", "CancelJob"),
)

AUDIT_LIST = Endpoint(
    name="audit_list",
    method="GET",
    path="/v1/audit/groups",
    request=NoBody,
    response=AuditList,
    rpc=("Audit", "ListGroups"),
    query_params=("question_id", "limit"),
)
"""The tenant's latest audited groups (query: `question_id`, `limit`)."""
AUDIT_GET = Endpoint(
    name="audit_get",
    method="GET",
    path="/v1/audit/groups/{scoring_id}",
    request=NoBody,
    response=AuditView,
    rpc=("Audit", "GetGroup"),
)
AUDIT_SIGNALS = Endpoint(
    name="audit_signals",
    method="GET",
    path="/v1/audit/signals",
    request=NoBody,
    response=AuditSignals,
    rpc=("Audit", "GetSignals"),
    query_params=("question_id",),
)
"""Drift and gaming signals per training step (query: `question_id`)."""
AUDIT_SETTINGS = Endpoint(
    name="audit_settings",
    method="GET",
    path="/v1/audit/settings",
    request=NoBody,
    response=AuditTenantSettings,
    rpc=("Audit", "GetSettings"),
)
AUDIT_SETTINGS_PUT = Endpoint(
    name="audit_settings_put",
    method="PUT",
    path="/v1/audit/settings",
    request=AuditTenantSettings,
    response=AuditTenantSettings,
    rpc=("Audit", "PutSettings"),
)
AUDIT_DELETE = Endpoint(
    name="audit_delete",
    method="DELETE",
    path="/v1/audit/groups",
    request=NoBody,
    response=AuditDeleted,
    rpc=("Audit", "DeleteGroups"),
    query_params=("question_id",),
)
"""Delete the tenant's audit records and kept trajectories (query: `question_id`)."""
AUDIT_REPLAY = Endpoint(
    name="audit_replay",
    method="POST",
    path="/v1/audit/replay",
    request=ReplayRequest,
    response=ReplayJob,
    rpc=("Audit", "Replay"),
)
"""Re-score stored scorings with the live judge, the reference judge or the current buffer."""
AUDIT_REPLAY_JOB = Endpoint(
    name="audit_replay_job",
    method="GET",
    path="/v1/audit/replay/{job_id}",
    request=NoBody,
    response=ReplayJob,
    rpc=("Audit", "GetReplayJob"),
)
BUFFER_HISTORY = Endpoint(
    name="buffer_history",
    method="GET",
    path="/v1/buffers/{question_id}/history",
    request=NoBody,
    response=RubricHistory,
    rpc=("Stagewise", "GetBufferHistory"),
)
"""Every rubric that was ever in a question's buffer, with when it was added and pruned."""

ENDPOINTS: tuple[Endpoint[Any, Any], ...] = (
    STAGEWISE_SCORE,
    STAGEWISE_ADVANTAGES,
    GET_BUFFER,
    GET_REWARD,
    NUGGETS_VERIFY,
    NUGGETS_VERIFY_BATCH,
    STEPS_SEGMENT,
    STEPS_RUBRIC,
    STEPS_VERIFY,
    STEPS_SCORE,
    LISTWISE_REWARD,
    RANK,
    REFLECTIONS_SCORE,
    BANK_RETRIEVE,
    CORPORA_INGEST,
    CORPORA_LIST,
    NUGGETS_MINE,
    GET_JOB,
    CANCEL_JOB,
    AUDIT_LIST,
    AUDIT_GET,
    AUDIT_DELETE,
    AUDIT_SIGNALS,
    AUDIT_SETTINGS,
    AUDIT_SETTINGS_PUT,
    AUDIT_REPLAY,
    AUDIT_REPLAY_JOB,
    BUFFER_HISTORY,
)
"""Every public endpoint; the gRPC server serves the ones with an `rpc`."""

MINED_NUGGETS = Endpoint(
    name="mined_nuggets",
    method="GET",
    path="/v1/nuggets",
    request=NoBody,
    response=NuggetsView,
    rpc=None,
)
AUTH_TOKEN = Endpoint(
    name="auth_token",
    method="POST",
    path="/v1/auth/tokens",
    request=ScopedTokenRequest,
    response=ScopedTokenResponse,
    rpc=None,
)
BANK_ITEM = Endpoint(
    name="bank_item",
    method="GET",
    path="/v1/bank/items/{question_hash}",
    request=NoBody,
    response=RetrievedItem,
    rpc=None,
)
BANK_STATS = Endpoint(
    name="bank_stats",
    method="GET",
    path="/v1/bank/stats",
    request=NoBody,
    response=BankStats,
    rpc=None,
)
BANK_SNAPSHOT = Endpoint(
    name="bank_snapshot",
    method="POST",
    path="/v1/bank/snapshots",
    request=SnapshotRequest,
    response=SnapshotInfo,
    rpc=None,
)
BANK_SNAPSHOTS = Endpoint(
    name="bank_snapshots",
    method="GET",
    path="/v1/bank/snapshots",
    request=NoBody,
    response=SnapshotList,
    rpc=None,
)
BANK_RESTORE = Endpoint(
    name="bank_restore",
    method="POST",
    path="/v1/bank/restore",
    request=RestoreRequest,
    response=RestoreResponse,
    rpc=None,
)
BANK_SNAPSHOT_EXPORT = Endpoint(
    name="bank_snapshot_export",
    method="GET",
    path="/v1/bank/snapshots/{step}/export",
    request=NoBody,
    response=JsonLines,
    rpc=None,
)
BANK_SNAPSHOT_IMPORT = Endpoint(
    name="bank_snapshot_import",
    method="POST",
    path="/v1/bank/snapshots/import",
    request=JsonLines,
    response=SnapshotInfo,
    rpc=None,
)

RUBRIC_HISTORY_EXPORT = Endpoint(
    name="rubric_history_export",
    method="GET",
    path="/v1/audit/rubric-history",
    request=NoBody,
    response=JsonLines,
    rpc=None,
)
"""The tenant's whole rubric history as JSONL (one `RubricHistoryEntry` a line): publish a
run's rubrics with its results."""

# --- curation and browsing (the rubric console uses these; docs/console.md) ---------------

QUESTIONS_LIST = Endpoint(
    name="questions_list",
    method="GET",
    path="/v1/questions",
    request=NoBody,
    response=QuestionList,
    rpc=None,
    query_params=("search", "sort", "offset", "limit"),
)
"""The tenant's questions with their buffer sizes, one page at a time."""
RUBRIC_CURATE = Endpoint(
    name="rubric_curate",
    method="POST",
    path="/v1/buffers/{question_id}/rubrics/{rubric_id}/curate",
    request=RubricCurationRequest,
    response=RubricCurationResult,
    rpc=None,
)
"""Pin, unpin, retire or edit one rubric of a question's buffer; the author is recorded."""
RUBRIC_CURATIONS = Endpoint(
    name="rubric_curations",
    method="GET",
    path="/v1/buffers/{question_id}/curations",
    request=NoBody,
    response=CurationList,
    rpc=None,
)
"""Who pinned, retired or edited which rubric of a question, and when."""
SCORINGS_LIST = Endpoint(
    name="scorings_list",
    method="GET",
    path="/v1/scorings",
    request=NoBody,
    response=ScoringList,
    rpc=None,
    query_params=("question_id", "limit"),
)
"""A question's latest stored scorings (judgments and justifications per rollout)."""
SCORING_GET = Endpoint(
    name="scoring_get",
    method="GET",
    path="/v1/scorings/{scoring_id}",
    request=NoBody,
    response=StoredScoring,
    rpc=None,
)
BANK_ITEMS_LIST = Endpoint(
    name="bank_items_list",
    method="GET",
    path="/v1/bank/items",
    request=NoBody,
    response=BankItemList,
    rpc=None,
    query_params=("status", "search", "offset", "limit"),
)
BANK_ITEM_CURATE = Endpoint(
    name="bank_item_curate",
    method="POST",
    path="/v1/bank/items/{question_hash}/curate",
    request=BankItemCurationRequest,
    response=BankItemCurationResult,
    rpc=None,
)
"""Approve, edit or retire a bank item; an edit keeps the old version in its history."""
BANK_ITEM_HISTORY = Endpoint(
    name="bank_item_history",
    method="GET",
    path="/v1/bank/items/{question_hash}/history",
    request=NoBody,
    response=BankItemHistory,
    rpc=None,
)
JOBS_LIST = Endpoint(
    name="jobs_list",
    method="GET",
    path="/v1/jobs",
    request=NoBody,
    response=JobList,
    rpc=None,
    query_params=("state", "limit"),
)
"""The tenant's latest mining and ingestion jobs."""
AUDIT_REPLAY_JOBS = Endpoint(
    name="audit_replay_jobs",
    method="GET",
    path="/v1/audit/replay",
    request=NoBody,
    response=ReplayJobList,
    rpc=None,
    query_params=("limit",),
)
AUDIT_QUESTIONS = Endpoint(
    name="audit_questions",
    method="GET",
    path="/v1/audit/questions",
    request=NoBody,
    response=QuestionAuditList,
    rpc=None,
    query_params=("question_ids",),
)
"""Audit status of several questions at once (`question_ids`: comma-separated, at most 200)."""
AUDIT_TRAJECTORIES = Endpoint(
    name="audit_trajectories",
    method="GET",
    path="/v1/audit/groups/{scoring_id}/trajectories",
    request=NoBody,
    response=ScoringTrajectories,
    rpc=None,
)
"""The trajectories kept with an audited scoring (the tenant's retention)."""

CURATION_ROUTES: tuple[Endpoint[Any, Any], ...] = (
    QUESTIONS_LIST,
    RUBRIC_CURATE,
    RUBRIC_CURATIONS,
    SCORINGS_LIST,
    SCORING_GET,
    BANK_ITEMS_LIST,
    BANK_ITEM_CURATE,
    BANK_ITEM_HISTORY,
    JOBS_LIST,
    AUDIT_REPLAY_JOBS,
    AUDIT_QUESTIONS,
    AUDIT_TRAJECTORIES,
)
"""Browsing and curation: HTTP only. They serve people (the console, scripts), not a
trainer's hot path, so they have no gRPC method."""

HTTP_ONLY: tuple[Endpoint[Any, Any], ...] = (
    AUTH_TOKEN,
    MINED_NUGGETS,
    BANK_ITEM,
    BANK_STATS,
    BANK_SNAPSHOT,
    BANK_SNAPSHOTS,
    BANK_RESTORE,
    BANK_SNAPSHOT_EXPORT,
    BANK_SNAPSHOT_IMPORT,
    RUBRIC_HISTORY_EXPORT,
    *CURATION_ROUTES,
)
"""Public routes without a gRPC method. The exports and the import are files of JSON Lines,
read and written as a stream, which a unary RPC does not fit: a whole bank snapshot or a
tenant's whole rubric history would be one message (over gRPC, read a question's history with
`Stagewise/GetBufferHistory`)."""

PUBLIC_ROUTES: tuple[Endpoint[Any, Any], ...] = ENDPOINTS + HTTP_ONLY
"""Every public route of the gateway; it serves exactly these, at these paths
(`tests/rpc/test_proto_coverage.py`)."""
