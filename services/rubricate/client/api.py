"""The typed endpoint methods, written once for the sync clients and once for the async ones
(HTTP and gRPC alike). A transport implements `call` and `call_many`."""

import abc
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel

from rubricate.gateway.endpoints import (
    GET_BUFFER,
    GET_REWARD,
    STAGEWISE_ADVANTAGES,
    STAGEWISE_SCORE,
    Endpoint,
    NoBody,
)
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
