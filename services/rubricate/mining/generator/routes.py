"""Routes of the rubric-generator's nugget-mining tasks (declared in
`mining.generator.endpoints`; a model failure is answered by the model server's one `LLMError`
handler, named after the route: the task's label)."""

from typing import Annotated

from fastapi import APIRouter, Depends

from rubricate.llm.server import task_service
from rubricate.mining.generator import schemas
from rubricate.mining.generator.endpoints import (
    NUGGET_EXTRACTION,
    NUGGET_IMPORTANCE,
    NUGGET_MERGE,
    QUERY_REWRITES,
)
from rubricate.mining.generator.service import MiningGenerationService

SERVICE_NAME = "mining"
"""Name of the service object on `app.state` (one of the model server's task services)."""

router = APIRouter(tags=["mining tasks"])
Service = Annotated[MiningGenerationService, Depends(task_service(SERVICE_NAME))]


@router.post(QUERY_REWRITES.path, name=QUERY_REWRITES.name, response_model=QUERY_REWRITES.response)
async def query_rewrites(
    body: schemas.QueryRewritesRequest, service: Service
) -> schemas.QueryRewritesResponse:
    return await service.query_rewrites(body)


@router.post(
    NUGGET_EXTRACTION.path, name=NUGGET_EXTRACTION.name, response_model=NUGGET_EXTRACTION.response
)
async def nugget_extraction(
    body: schemas.NuggetExtractionRequest, service: Service
) -> schemas.NuggetExtractionResponse:
    return await service.extract(body)


@router.post(NUGGET_MERGE.path, name=NUGGET_MERGE.name, response_model=NUGGET_MERGE.response)
async def nugget_merge(
    body: schemas.NuggetMergeRequest, service: Service
) -> schemas.NuggetMergeResponse:
    return await service.merge(body)


@router.post(
    NUGGET_IMPORTANCE.path, name=NUGGET_IMPORTANCE.name, response_model=NUGGET_IMPORTANCE.response
)
async def nugget_importance(
    body: schemas.NuggetImportanceRequest, service: Service
) -> schemas.NuggetImportanceResponse:
    return await service.importance(body)
