"""The verifier's nugget-label task route (a model failure is answered by the model server's
one `LLMError` handler, named after the route: `nugget_verification`)."""

from typing import Annotated

from fastapi import APIRouter, Depends

from rubricate.llm.server import task_service
from rubricate.nuggets.verifier.endpoints import NUGGET_LABELS
from rubricate.nuggets.verifier.schemas import NuggetLabelsRequest, NuggetLabelsResponse
from rubricate.nuggets.verifier.service import NuggetLabelService

router = APIRouter(tags=["tasks"])

SERVICE_NAME = "nugget_labels"
"""The attribute of `app.state` holding the `NuggetLabelService`."""

ServiceDep = Annotated[NuggetLabelService, Depends(task_service(SERVICE_NAME))]


@router.post(NUGGET_LABELS.path, name=NUGGET_LABELS.name, response_model=NuggetLabelsResponse)
async def nugget_labels(body: NuggetLabelsRequest, service: ServiceDep) -> NuggetLabelsResponse:
    return await service.label(body)
