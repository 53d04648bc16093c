"""Public routes of nugget verification: parse, call the service object, respond."""

from typing import Annotated

from fastapi import APIRouter, Depends

from rubricate.common.routing import state_service
from rubricate.common.tenancy import TenantDep
from rubricate.common.usage import Usage
from rubricate.nuggets.gateway.service import NuggetService
from rubricate_client.endpoints import NUGGETS_VERIFY, NUGGETS_VERIFY_BATCH
from rubricate_client.schemas.nuggets import (
    NuggetVerifyBatchRequest,
    NuggetVerifyBatchResponse,
    NuggetVerifyRequest,
    NuggetVerifyResponse,
)

router = APIRouter(tags=["rewards"])

STATE_NAME = "nuggets"
"""The attribute of `app.state` holding the `NuggetService`."""

NuggetsDep = Annotated[NuggetService, Depends(state_service(NuggetService, STATE_NAME))]


@router.post(
    NUGGETS_VERIFY.path,
    response_model=NuggetVerifyResponse,
    summary="Nugget reward of one answer: labels per block, max-pooled, weighted",
)
async def verify(
    body: NuggetVerifyRequest, service: NuggetsDep, tenant: TenantDep = "default"
) -> NuggetVerifyResponse:
    return await service.verify(body, usage=Usage(), tenant=tenant)


@router.post(
    NUGGETS_VERIFY_BATCH.path,
    response_model=NuggetVerifyBatchResponse,
    summary="Nugget rewards of many answers at once; failed items are reported, not zeroed",
)
async def verify_batch(
    body: NuggetVerifyBatchRequest, service: NuggetsDep, tenant: TenantDep = "default"
) -> NuggetVerifyBatchResponse:
    return await service.verify_batch(body, tenant)
