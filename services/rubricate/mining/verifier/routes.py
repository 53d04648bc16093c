"""Routes of the verifier's nugget-mining judgments."""

from typing import Annotated

from fastapi import APIRouter, Depends, Request

from rubricate.llm.errors import LLMError
from rubricate.llm.server import as_service_error
from rubricate.mining.verifier.schemas import (
    QueryDuplicateRequest,
    QueryDuplicateResponse,
    TemporalCheckRequest,
    TemporalCheckResponse,
)
from rubricate.mining.verifier.service import DUPLICATE_TASK, TEMPORAL_TASK, MiningJudgeService

SERVICE_NAME = "mining"
"""Name of the service object on `app.state` (registered through `extra_services`)."""

router = APIRouter(prefix="/v1/tasks", tags=["mining tasks"])


def get_service(request: Request) -> MiningJudgeService:
    service: MiningJudgeService = getattr(request.app.state, SERVICE_NAME)
    return service


ServiceDep = Annotated[MiningJudgeService, Depends(get_service)]


@router.post("/temporal-check", response_model=TemporalCheckResponse)
async def temporal_check(body: TemporalCheckRequest, service: ServiceDep) -> TemporalCheckResponse:
    try:
        return await service.temporal_check(body)
    except LLMError as exc:
        raise as_service_error(exc, task=TEMPORAL_TASK) from exc


@router.post("/query-duplicate", response_model=QueryDuplicateResponse)
async def query_duplicate(
    body: QueryDuplicateRequest, service: ServiceDep
) -> QueryDuplicateResponse:
    try:
        return await service.query_duplicate(body)
    except LLMError as exc:
        raise as_service_error(exc, task=DUPLICATE_TASK) from exc
