"""Typed methods of the HTTP-only browsing and curation routes (`CURATION_ROUTES`), mixed
into the HTTP clients only: these routes have no gRPC method (docs/console.md)."""

import abc
from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel

from rubricate_client.api import Body, query
from rubricate_client.endpoints import (
    AUDIT_QUESTIONS,
    AUDIT_REPLAY_JOBS,
    AUDIT_TRAJECTORIES,
    BANK_ITEM_CURATE,
    BANK_ITEM_HISTORY,
    BANK_ITEMS_LIST,
    JOBS_LIST,
    QUESTIONS_LIST,
    RUBRIC_CURATE,
    RUBRIC_CURATIONS,
    SCORING_GET,
    SCORINGS_LIST,
    Endpoint,
)
from rubricate_client.schemas.audit import QuestionAuditList, ReplayJobList, ScoringTrajectories
from rubricate_client.schemas.bank import BankItemCurationResult, BankItemHistory, BankItemList
from rubricate_client.schemas.buffers import QuestionList, QuestionSort, RubricCurationResult
from rubricate_client.schemas.curation import (
    BankItemCurationRequest,
    BankStatus,
    CurationList,
    RubricCurationRequest,
)
from rubricate_client.schemas.mining import JobList, JobStateName
from rubricate_client.schemas.scorings import ScoringList, StoredScoring

RespT = TypeVar("RespT", bound=BaseModel)


class SyncCurationAPI(abc.ABC):
    @abc.abstractmethod
    def call(
        self,
        endpoint: Endpoint[Any, RespT],
        body: Body = None,
        *,
        path: Mapping[str, str] | None = None,
    ) -> RespT: ...

    def list_questions(
        self,
        *,
        search: str | None = None,
        sort: QuestionSort | None = None,
        offset: int | None = None,
        limit: int | None = None,
    ) -> QuestionList:
        return self.call(
            QUESTIONS_LIST, path=query(search=search, sort=sort, offset=offset, limit=limit)
        )

    def curate_rubric(
        self,
        question_id: str,
        rubric_id: str,
        request: RubricCurationRequest | Mapping[str, Any],
    ) -> RubricCurationResult:
        return self.call(
            RUBRIC_CURATE, request, path={"question_id": question_id, "rubric_id": rubric_id}
        )

    def rubric_curations(self, question_id: str) -> CurationList:
        return self.call(RUBRIC_CURATIONS, path={"question_id": question_id})

    def list_scorings(self, question_id: str, *, limit: int | None = None) -> ScoringList:
        return self.call(SCORINGS_LIST, path=query(question_id=question_id, limit=limit))

    def get_scoring(self, scoring_id: str) -> StoredScoring:
        return self.call(SCORING_GET, path={"scoring_id": scoring_id})

    def list_bank_items(
        self,
        *,
        status: BankStatus | None = None,
        search: str | None = None,
        offset: int | None = None,
        limit: int | None = None,
    ) -> BankItemList:
        return self.call(
            BANK_ITEMS_LIST, path=query(status=status, search=search, offset=offset, limit=limit)
        )

    def curate_bank_item(
        self, question_hash: str, request: BankItemCurationRequest | Mapping[str, Any]
    ) -> BankItemCurationResult:
        return self.call(BANK_ITEM_CURATE, request, path={"question_hash": question_hash})

    def bank_item_history(self, question_hash: str) -> BankItemHistory:
        return self.call(BANK_ITEM_HISTORY, path={"question_hash": question_hash})

    def list_jobs(self, *, state: JobStateName | None = None, limit: int | None = None) -> JobList:
        return self.call(JOBS_LIST, path=query(state=state, limit=limit))

    def list_replay_jobs(self, *, limit: int | None = None) -> ReplayJobList:
        return self.call(AUDIT_REPLAY_JOBS, path=query(limit=limit))

    def audit_questions(self, question_ids: list[str]) -> QuestionAuditList:
        return self.call(AUDIT_QUESTIONS, path={"question_ids": ",".join(question_ids)})

    def scoring_trajectories(self, scoring_id: str) -> ScoringTrajectories:
        return self.call(AUDIT_TRAJECTORIES, path={"scoring_id": scoring_id})


class AsyncCurationAPI(abc.ABC):
    @abc.abstractmethod
    async def call(
        self,
        endpoint: Endpoint[Any, RespT],
        body: Body = None,
        *,
        path: Mapping[str, str] | None = None,
    ) -> RespT: ...

    async def list_questions(
        self,
        *,
        search: str | None = None,
        sort: QuestionSort | None = None,
        offset: int | None = None,
        limit: int | None = None,
    ) -> QuestionList:
        return await self.call(
            QUESTIONS_LIST, path=query(search=search, sort=sort, offset=offset, limit=limit)
        )

    async def curate_rubric(
        self,
        question_id: str,
        rubric_id: str,
        request: RubricCurationRequest | Mapping[str, Any],
    ) -> RubricCurationResult:
        return await self.call(
            RUBRIC_CURATE, request, path={"question_id": question_id, "rubric_id": rubric_id}
        )

    async def rubric_curations(self, question_id: str) -> CurationList:
        return await self.call(RUBRIC_CURATIONS, path={"question_id": question_id})

    async def list_scorings(self, question_id: str, *, limit: int | None = None) -> ScoringList:
        return await self.call(SCORINGS_LIST, path=query(question_id=question_id, limit=limit))

    async def get_scoring(self, scoring_id: str) -> StoredScoring:
        return await self.call(SCORING_GET, path={"scoring_id": scoring_id})

    async def list_bank_items(
        self,
        *,
        status: BankStatus | None = None,
        search: str | None = None,
        offset: int | None = None,
        limit: int | None = None,
    ) -> BankItemList:
        return await self.call(
            BANK_ITEMS_LIST, path=query(status=status, search=search, offset=offset, limit=limit)
        )

    async def curate_bank_item(
        self, question_hash: str, request: BankItemCurationRequest | Mapping[str, Any]
    ) -> BankItemCurationResult:
        return await self.call(BANK_ITEM_CURATE, request, path={"question_hash": question_hash})

    async def bank_item_history(self, question_hash: str) -> BankItemHistory:
        return await self.call(BANK_ITEM_HISTORY, path={"question_hash": question_hash})

    async def list_jobs(
        self, *, state: JobStateName | None = None, limit: int | None = None
    ) -> JobList:
        return await self.call(JOBS_LIST, path=query(state=state, limit=limit))

    async def list_replay_jobs(self, *, limit: int | None = None) -> ReplayJobList:
        return await self.call(AUDIT_REPLAY_JOBS, path=query(limit=limit))

    async def audit_questions(self, question_ids: list[str]) -> QuestionAuditList:
        return await self.call(AUDIT_QUESTIONS, path={"question_ids": ",".join(question_ids)})

    async def scoring_trajectories(self, scoring_id: str) -> ScoringTrajectories:
        return await self.call(AUDIT_TRAJECTORIES, path={"scoring_id": scoring_id})
