"""The typed endpoint methods, written once for the sync clients and once for the async ones
(HTTP and gRPC alike). A transport implements `call` and `call_many`."""

import abc
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel

from rubricate_client.endpoints import (
    AUDIT_DELETE,
    AUDIT_GET,
    AUDIT_LIST,
    AUDIT_REPLAY,
    AUDIT_REPLAY_JOB,
    AUDIT_SETTINGS,
    AUDIT_SETTINGS_PUT,
    AUDIT_SIGNALS,
    BANK_RETRIEVE,
    BUFFER_HISTORY,
    CANCEL_JOB,
    CORPORA_INGEST,
    CORPORA_LIST,
    GET_BUFFER,
    GET_JOB,
    GET_REWARD,
    LISTWISE_REWARD,
    NUGGETS_MINE,
    NUGGETS_VERIFY,
    NUGGETS_VERIFY_BATCH,
    RANK,
    REFLECTIONS_SCORE,
    STAGEWISE_ADVANTAGES,
    STAGEWISE_SCORE,
    STEPS_RUBRIC,
    STEPS_SCORE,
    STEPS_SEGMENT,
    STEPS_VERIFY,
    Endpoint,
    NoBody,
)
from rubricate_client.schemas.audit import (
    AuditDeleted,
    AuditList,
    AuditSignals,
    AuditTenantSettings,
    AuditView,
    ReplayJob,
    ReplayRequest,
    RubricHistory,
)
from rubricate_client.schemas.buffers import BufferView
from rubricate_client.schemas.mining import CorpusList, IngestRequest, JobView, MineRequest
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
Body = BaseModel | Mapping[str, Any] | None


def as_model(endpoint: Endpoint[Any, Any], body: Body) -> BaseModel:
    """The request model; a mapping is validated here (a local pydantic error, no request)."""
    if body is None:
        return NoBody()
    if isinstance(body, BaseModel):
        expected: type[BaseModel] = endpoint.request
        if not isinstance(body, expected):
            raise TypeError(f"{endpoint.name} takes {expected.__name__}, got {type(body).__name__}")
        return body
    model: BaseModel = endpoint.request.model_validate(dict(body))
    return model


def payload(model: BaseModel) -> dict[str, Any]:
    """The JSON body: the fields the caller set, by their wire names."""
    data: dict[str, Any] = model.model_dump(mode="json", by_alias=True, exclude_unset=True)
    return data


def query(**values: str | int | None) -> dict[str, str]:
    """The query parameters given (None: left out), as text, passed with the path parameters."""
    return {k: str(v) for k, v in values.items() if v is not None}


IDEMPOTENCY_HEADER = "idempotency-key"


def idempotency_headers(endpoint: Endpoint[Any, Any], *, enabled: bool) -> dict[str, str]:
    """A fresh `Idempotency-Key` for a POST, the same for all its retries: the gateway then
    applies a retried scoring once (it replays the first answer)."""
    if not enabled or endpoint.method != "POST":
        return {}
    return {IDEMPOTENCY_HEADER: uuid.uuid4().hex}


class SyncAPI(abc.ABC):
    @abc.abstractmethod
    def call(
        self,
        endpoint: Endpoint[Any, RespT],
        body: Body = None,
        *,
        path: Mapping[str, str] | None = None,
    ) -> RespT: ...

    @abc.abstractmethod
    def call_many(self, endpoint: Endpoint[Any, RespT], bodies: Sequence[Body]) -> list[RespT]:
        """Several calls with at most `concurrency` in flight; results in order."""

    def score_stagewise(
        self, request: StagewiseScoreRequest | Mapping[str, Any]
    ) -> StagewiseScoreResponse:
        return self.call(STAGEWISE_SCORE, request)

    def score_stagewise_many(
        self, requests: Sequence[StagewiseScoreRequest | Mapping[str, Any]]
    ) -> list[StagewiseScoreResponse]:
        return self.call_many(STAGEWISE_SCORE, requests)

    def stagewise_advantages(
        self, request: AdvantagesRequest | Mapping[str, Any]
    ) -> AdvantagesResponse:
        return self.call(STAGEWISE_ADVANTAGES, request)

    def get_buffer(self, question_id: str) -> BufferView:
        return self.call(GET_BUFFER, path={"question_id": question_id})

    def get_reward(self, request: GetRewardRequest | Mapping[str, Any]) -> GetRewardResponse:
        return self.call(GET_REWARD, request)

    def verify_nuggets(
        self, request: NuggetVerifyRequest | Mapping[str, Any]
    ) -> NuggetVerifyResponse:
        return self.call(NUGGETS_VERIFY, request)

    def verify_nuggets_batch(
        self, request: NuggetVerifyBatchRequest | Mapping[str, Any]
    ) -> NuggetVerifyBatchResponse:
        return self.call(NUGGETS_VERIFY_BATCH, request)

    def segment_steps(self, request: SegmentRequest | Mapping[str, Any]) -> SegmentResponse:
        return self.call(STEPS_SEGMENT, request)

    def step_rubric(self, request: StepRubricRequest | Mapping[str, Any]) -> StepRubricResponse:
        return self.call(STEPS_RUBRIC, request)

    def verify_step(self, request: VerifyRequest | Mapping[str, Any]) -> VerifyResponse:
        return self.call(STEPS_VERIFY, request)

    def score_steps(self, request: ScoreRequest | Mapping[str, Any]) -> ScoreResponse:
        return self.call(STEPS_SCORE, request)

    def listwise_reward(
        self, request: ListwiseRewardRequest | Mapping[str, Any]
    ) -> ListwiseRewardResponse:
        return self.call(LISTWISE_REWARD, request)

    def rank(self, request: RankRequest | Mapping[str, Any]) -> RankResponse:
        return self.call(RANK, request)

    def score_reflections(
        self, request: ReflectionScoreRequest | Mapping[str, Any]
    ) -> ReflectionScoreResponse:
        return self.call(REFLECTIONS_SCORE, request)

    def retrieve_bank(
        self, request: BankRetrieveRequest | Mapping[str, Any]
    ) -> BankRetrieveResponse:
        return self.call(BANK_RETRIEVE, request)

    def ingest_corpus(self, request: IngestRequest | Mapping[str, Any]) -> JobView:
        return self.call(CORPORA_INGEST, request)

    def mine_nuggets(self, request: MineRequest | Mapping[str, Any]) -> JobView:
        return self.call(NUGGETS_MINE, request)

    def list_corpora(self) -> CorpusList:
        return self.call(CORPORA_LIST)

    def get_job(self, job_id: str) -> JobView:
        return self.call(GET_JOB, path={"job_id": job_id})

    def cancel_job(self, job_id: str) -> JobView:
        return self.call(CANCEL_JOB, path={"job_id": job_id})

    def get_buffer_history(self, question_id: str) -> RubricHistory:
        return self.call(BUFFER_HISTORY, path={"question_id": question_id})

    def list_audits(self, *, question_id: str | None = None, limit: int | None = None) -> AuditList:
        return self.call(AUDIT_LIST, path=query(question_id=question_id, limit=limit))

    def get_audit(self, scoring_id: str) -> AuditView:
        return self.call(AUDIT_GET, path={"scoring_id": scoring_id})

    def delete_audits(self, *, question_id: str | None = None) -> AuditDeleted:
        return self.call(AUDIT_DELETE, path=query(question_id=question_id))

    def audit_signals(self, *, question_id: str | None = None) -> AuditSignals:
        return self.call(AUDIT_SIGNALS, path=query(question_id=question_id))

    def get_audit_settings(self) -> AuditTenantSettings:
        return self.call(AUDIT_SETTINGS)

    def set_audit_settings(
        self, settings: AuditTenantSettings | Mapping[str, Any]
    ) -> AuditTenantSettings:
        return self.call(AUDIT_SETTINGS_PUT, settings)

    def replay(self, request: ReplayRequest | Mapping[str, Any]) -> ReplayJob:
        return self.call(AUDIT_REPLAY, request)

    def get_replay_job(self, job_id: str) -> ReplayJob:
        return self.call(AUDIT_REPLAY_JOB, path={"job_id": job_id})


class AsyncAPI(abc.ABC):
    @abc.abstractmethod
    async def call(
        self,
        endpoint: Endpoint[Any, RespT],
        body: Body = None,
        *,
        path: Mapping[str, str] | None = None,
    ) -> RespT: ...

    @abc.abstractmethod
    async def call_many(
        self, endpoint: Endpoint[Any, RespT], bodies: Sequence[Body]
    ) -> list[RespT]:
        """Several calls with at most `concurrency` in flight; results in order."""

    async def score_stagewise(
        self, request: StagewiseScoreRequest | Mapping[str, Any]
    ) -> StagewiseScoreResponse:
        return await self.call(STAGEWISE_SCORE, request)

    async def score_stagewise_many(
        self, requests: Sequence[StagewiseScoreRequest | Mapping[str, Any]]
    ) -> list[StagewiseScoreResponse]:
        return await self.call_many(STAGEWISE_SCORE, requests)

    async def stagewise_advantages(
        self, request: AdvantagesRequest | Mapping[str, Any]
    ) -> AdvantagesResponse:
        return await self.call(STAGEWISE_ADVANTAGES, request)

    async def get_buffer(self, question_id: str) -> BufferView:
        return await self.call(GET_BUFFER, path={"question_id": question_id})

    async def get_reward(self, request: GetRewardRequest | Mapping[str, Any]) -> GetRewardResponse:
        return await self.call(GET_REWARD, request)

    async def verify_nuggets(
        self, request: NuggetVerifyRequest | Mapping[str, Any]
    ) -> NuggetVerifyResponse:
        return await self.call(NUGGETS_VERIFY, request)

    async def verify_nuggets_batch(
        self, request: NuggetVerifyBatchRequest | Mapping[str, Any]
    ) -> NuggetVerifyBatchResponse:
        return await self.call(NUGGETS_VERIFY_BATCH, request)

    async def segment_steps(self, request: SegmentRequest | Mapping[str, Any]) -> SegmentResponse:
        return await self.call(STEPS_SEGMENT, request)

    async def step_rubric(
        self, request: StepRubricRequest | Mapping[str, Any]
    ) -> StepRubricResponse:
        return await self.call(STEPS_RUBRIC, request)

    async def verify_step(self, request: VerifyRequest | Mapping[str, Any]) -> VerifyResponse:
        return await self.call(STEPS_VERIFY, request)

    async def score_steps(self, request: ScoreRequest | Mapping[str, Any]) -> ScoreResponse:
        return await self.call(STEPS_SCORE, request)

    async def listwise_reward(
        self, request: ListwiseRewardRequest | Mapping[str, Any]
    ) -> ListwiseRewardResponse:
        return await self.call(LISTWISE_REWARD, request)

    async def rank(self, request: RankRequest | Mapping[str, Any]) -> RankResponse:
        return await self.call(RANK, request)

    async def score_reflections(
        self, request: ReflectionScoreRequest | Mapping[str, Any]
    ) -> ReflectionScoreResponse:
        return await self.call(REFLECTIONS_SCORE, request)

    async def retrieve_bank(
        self, request: BankRetrieveRequest | Mapping[str, Any]
    ) -> BankRetrieveResponse:
        return await self.call(BANK_RETRIEVE, request)

    async def ingest_corpus(self, request: IngestRequest | Mapping[str, Any]) -> JobView:
        return await self.call(CORPORA_INGEST, request)

    async def mine_nuggets(self, request: MineRequest | Mapping[str, Any]) -> JobView:
        return await self.call(NUGGETS_MINE, request)

    async def list_corpora(self) -> CorpusList:
        return await self.call(CORPORA_LIST)

    async def get_job(self, job_id: str) -> JobView:
        return await self.call(GET_JOB, path={"job_id": job_id})

    async def cancel_job(self, job_id: str) -> JobView:
        return await self.call(CANCEL_JOB, path={"job_id": job_id})

    async def get_buffer_history(self, question_id: str) -> RubricHistory:
        return await self.call(BUFFER_HISTORY, path={"question_id": question_id})

    async def list_audits(
        self, *, question_id: str | None = None, limit: int | None = None
    ) -> AuditList:
        return await self.call(AUDIT_LIST, path=query(question_id=question_id, limit=limit))

    async def get_audit(self, scoring_id: str) -> AuditView:
        return await self.call(AUDIT_GET, path={"scoring_id": scoring_id})

    async def delete_audits(self, *, question_id: str | None = None) -> AuditDeleted:
        return await self.call(AUDIT_DELETE, path=query(question_id=question_id))

    async def audit_signals(self, *, question_id: str | None = None) -> AuditSignals:
        return await self.call(AUDIT_SIGNALS, path=query(question_id=question_id))

    async def get_audit_settings(self) -> AuditTenantSettings:
        return await self.call(AUDIT_SETTINGS)

    async def set_audit_settings(
        self, settings: AuditTenantSettings | Mapping[str, Any]
    ) -> AuditTenantSettings:
        return await self.call(AUDIT_SETTINGS_PUT, settings)

    async def replay(self, request: ReplayRequest | Mapping[str, Any]) -> ReplayJob:
        return await self.call(AUDIT_REPLAY, request)

    async def get_replay_job(self, job_id: str) -> ReplayJob:
        return await self.call(AUDIT_REPLAY_JOB, path={"job_id": job_id})
