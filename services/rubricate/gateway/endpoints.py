"""The gateway's public API as data: each endpoint's HTTP route, gRPC method and models.

The Python SDK (HTTP and gRPC clients) and the gateway's gRPC server are both driven by this
table, so a new endpoint is one `Endpoint(...)` entry here, its messages in
`proto/rubricate/v1/`, and one typed method per SDK mixin (`rubricate.client.api`).
"""

import re
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel

from rubricate.gateway.schemas import (
    AdvantagesRequest,
    AdvantagesResponse,
    StagewiseScoreRequest,
    StagewiseScoreResponse,
)
from rubricate.gateway.trainer_schemas import GetRewardRequest, GetRewardResponse
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

ENDPOINTS: tuple[Endpoint[Any, Any], ...] = (
    STAGEWISE_SCORE,
    STAGEWISE_ADVANTAGES,
    GET_BUFFER,
    GET_REWARD,
)
"""Every public endpoint; the gRPC server serves the ones with an `rpc`."""
