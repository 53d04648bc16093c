"""Routes of the verifier's nugget-mining judgments (declared in
`mining.verifier.endpoints`; a model failure is answered by the model server's one `LLMError`
handler, named after the route: the task's label)."""

from typing import Annotated

from fastapi import APIRouter, Depends

from rubricate.llm.server import task_service
from rubricate.mining.verifier.endpoints import QUERY_DUPLICATE, TEMPORAL_CHECK
from rubricate.mining.verifier.schemas import (
    QueryDuplicateRequest,
    QueryDuplicateResponse,
    TemporalCheckRequest,
    TemporalCheckResponse,
)
from rubricate.mining.verifier.service import MiningJudgeService

SERVICE_NAME = "mining"
"""Name of the service object on `app.state` (one of the model server's task services)."""

router = APIRouter(tags=["mining tasks"])
Service = Annotated[MiningJudgeService, Depends(task_service(SERVICE_NAME))]


@router.post(TEMPORAL_CHECK.path, name=TEMPORAL_CHECK.name, response_model=TEMPORAL_CHECK.response)
async def temporal_check(body: TemporalCheckRequest, service: Service) -> TemporalCheckResponse:
    return await service.temporal_check(body)


@router.post(
    QUERY_DUPLICATE.path, name=QUERY_DUPLICATE.name, response_model=QUERY_DUPLICATE.response
)
async def query_duplicate(body: QueryDuplicateRequest, service: Service) -> QueryDuplicateResponse:
    return await service.query_duplicate(body)
