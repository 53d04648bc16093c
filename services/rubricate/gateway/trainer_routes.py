"""`POST /get_reward`: the OpenRLHF remote reward-model endpoint (see trainer_rewards)."""

from typing import Annotated

from fastapi import APIRouter, Depends, Request

from rubricate.common.tenancy import TenantDep
from rubricate.gateway.invoke import RouteInvoker
from rubricate.gateway.settings import GatewaySettings
from rubricate.gateway.trainer_rewards import TrainerRewards
from rubricate.gateway.trainer_schemas import GetRewardRequest, GetRewardResponse

router = APIRouter(tags=["trainers"])


def get_trainer_rewards(request: Request) -> TrainerRewards:
    state = request.app.state
    service: TrainerRewards | None = getattr(state, "trainer_rewards", None)
    if service is None:
        settings: GatewaySettings = state.stagewise.settings
        service = TrainerRewards(
            invoker=RouteInvoker(request.app),
            default_kind=settings.reward_kind,
            group_concurrency=settings.reward_group_concurrency,
        )
        state.trainer_rewards = service
    return service


TrainerRewardsDep = Annotated[TrainerRewards, Depends(get_trainer_rewards)]


@router.post(
    "/get_reward",
    response_model=GetRewardResponse,
    summary="OpenRLHF remote reward model: one reward per (prompt + response)",
)
async def get_reward(
    body: GetRewardRequest,
    request: Request,
    service: TrainerRewardsDep,
    tenant: TenantDep = "default",
) -> GetRewardResponse:
    request_id = getattr(request.state, "request_id", None)
    return await service.get_reward(body, tenant=tenant, request_id=request_id)
