"""The verifier's nugget-label task route."""

from typing import Annotated

from fastapi import APIRouter, Depends, Request

from rubricate.llm.errors import LLMError
from rubricate.llm.server import as_service_error
from rubricate.nuggets.verifier.schemas import NuggetLabelsRequest, NuggetLabelsResponse
from rubricate.nuggets.verifier.service import TASK, NuggetLabelService

router = APIRouter(prefix="/v1/tasks", tags=["tasks"])

SERVICE_NAME = "nugget_labels"
"""The attribute of `app.state` holding the `NuggetLabelService`."""


def get_service(request: Request) -> NuggetLabelService:
    service: NuggetLabelService = getattr(request.app.state, SERVICE_NAME)
    return service


ServiceDep = Annotated[NuggetLabelService, Depends(get_service)]


@router.post("/nugget-labels", response_model=NuggetLabelsResponse)
async def nugget_labels(body: NuggetLabelsRequest, service: ServiceDep) -> NuggetLabelsResponse:
    try:
        return await service.label(body)
    except LLMError as exc:
        raise as_service_error(exc, task=TASK) from exc
