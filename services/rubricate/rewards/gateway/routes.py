"""`POST /get_reward`: the OpenRLHF remote reward-model endpoint (see `rewards.gateway.service`)."""

from typing import Annotated

from fastapi import APIRouter, Depends, Request

from rubricate.common.disconnect import unless_disconnected
from rubricate.common.routing import state_service
from rubricate.common.tenancy import TenantDep
from rubricate.common.tenant_limits import admit_rollouts
from rubricate.rewards.gateway.service import TrainerRewards
from rubricate_client.endpoints import GET_REWARD
from rubricate_client.schemas.rewards import GetRewardRequest, GetRewardResponse

router = APIRouter(tags=["trainers"])


STATE_NAME = "trainer_rewards"
"""The service object on `app.state`, built in the gateway's lifespan."""

TrainerRewardsDep = Annotated[TrainerRewards, Depends(state_service(TrainerRewards, STATE_NAME))]


@router.post(
    GET_REWARD.path,
    response_model=GetRewardResponse,
    summary="OpenRLHF remote reward model: one reward per (prompt + response)",
)
async def get_reward(
    body: GetRewardRequest,
    request: Request,
    service: TrainerRewardsDep,
    tenant: TenantDep = "default",
) -> GetRewardResponse:
    admit_rollouts(request, len(body.query))  # each sample is a pending rollout (429 past budget)
    # a trainer that gives up stops its request here (its retry waits on the same slot)
    return await unless_disconnected(request, service.get_reward(body, tenant=tenant))
