"""The gateway's public API as data: each endpoint's HTTP route, gRPC method and models.

The Python SDK (HTTP and gRPC clients) and the gateway's gRPC server are both driven by this
table, so a new endpoint is one `Endpoint(...)` entry here, its messages in
`proto/rubricate/v1/`, and one typed method per SDK mixin (`rubricate.client.api`).
"""

import re
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel

from rubricate.gateway.nugget_schemas import (
    NuggetVerifyBatchRequest,
    NuggetVerifyBatchResponse,
    NuggetVerifyRequest,
    NuggetVerifyResponse,
)
from rubricate.gateway.reflection_schemas import (
    BankRetrieveRequest,
    BankRetrieveResponse,
    ReflectionScoreRequest,
    ReflectionScoreResponse,
)
from rubricate.gateway.schemas import (
    AdvantagesRequest,
    AdvantagesResponse,
    StagewiseScoreRequest,
    StagewiseScoreResponse,
)
from rubricate.gateway.step_schemas import (
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
from rubricate.gateway.trainer_schemas import GetRewardRequest, GetRewardResponse
from rubricate.miner.schemas import CorpusList, IngestRequest, JobView, MineRequest
from rubricate.store.schemas import BufferView

ReqT = TypeVar("ReqT", bound=BaseModel)
RespT = TypeVar("RespT", bound=BaseModel)

PROTO_PACKAGE = "rubricate.v1"
_PATH_PARAM = re.compile(r"{([A-Za-z_][A-Za-z0-9_]*)}")


class NoBody(BaseModel):
    """The request model of an endpoint without a body (GET)."""


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
        return _PATH_PARAM.sub(lambda m: _quote(path_params[m.group(1)]), self.path)


def _quote(value: str) -> str:
    from urllib.parse import quote

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
)
"""Every public endpoint; the gRPC server serves the ones with an `rpc`."""
