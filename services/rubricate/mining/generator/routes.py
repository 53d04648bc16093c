"""Routes of the rubric-generator's nugget-mining tasks."""

from typing import Annotated

from fastapi import APIRouter, Depends, Request

from rubricate.llm.errors import LLMError
from rubricate.llm.server import as_service_error
from rubricate.mining.generator.schemas import (
    NuggetExtractionRequest,
    NuggetExtractionResponse,
    NuggetImportanceRequest,
    NuggetImportanceResponse,
    NuggetMergeRequest,
    NuggetMergeResponse,
    QueryRewritesRequest,
    QueryRewritesResponse,
)
from rubricate.mining.generator.service import (
    EXTRACT_TASK,
    IMPORTANCE_TASK,
    MERGE_TASK,
    REWRITE_TASK,
    MiningGenerationService,
)

SERVICE_NAME = "mining"
"""Name of the service object on `app.state` (registered through `extra_services`)."""

router = APIRouter(prefix="/v1/tasks", tags=["mining tasks"])


def get_service(request: Request) -> MiningGenerationService:
    service: MiningGenerationService = getattr(request.app.state, SERVICE_NAME)
    return service


ServiceDep = Annotated[MiningGenerationService, Depends(get_service)]


@router.post("/query-rewrites", response_model=QueryRewritesResponse)
async def query_rewrites(body: QueryRewritesRequest, service: ServiceDep) -> QueryRewritesResponse:
    try:
        return await service.query_rewrites(body)
    except LLMError as exc:
        raise as_service_error(exc, task=REWRITE_TASK) from exc


@router.post("/nugget-extraction", response_model=NuggetExtractionResponse)
async def nugget_extraction(
    body: NuggetExtractionRequest, service: ServiceDep
) -> NuggetExtractionResponse:
    try:
        return await service.extract(body)
    except LLMError as exc:
        raise as_service_error(exc, task=EXTRACT_TASK) from exc


@router.post("/nugget-merge", response_model=NuggetMergeResponse)
async def nugget_merge(body: NuggetMergeRequest, service: ServiceDep) -> NuggetMergeResponse:
    try:
        return await service.merge(body)
    except LLMError as exc:
        raise as_service_error(exc, task=MERGE_TASK) from exc


@router.post("/nugget-importance", response_model=NuggetImportanceResponse)
async def nugget_importance(
    body: NuggetImportanceRequest, service: ServiceDep
) -> NuggetImportanceResponse:
    try:
        return await service.importance(body)
    except LLMError as exc:
        raise as_service_error(exc, task=IMPORTANCE_TASK) from exc
