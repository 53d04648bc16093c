"""The verifier model server: every judging task family, registered as equals on one
backend (stage scores, nugget labels, reflection scores, mining judgments, step verdicts)."""

from typing import Unpack

from fastapi import FastAPI

from rubricate.llm.server import ModelServerSettings, create_model_server_app
from rubricate.mining.verifier import routes as mining_routes
from rubricate.mining.verifier.service import MiningJudgeService
from rubricate.nuggets.verifier import routes as nugget_routes
from rubricate.nuggets.verifier.service import NuggetLabelService
from rubricate.reflections.verifier import routes as reflection_routes
from rubricate.reflections.verifier.service import ReflectionJudgeService
from rubricate.stagewise.verifier import routes as stage_routes
from rubricate.stagewise.verifier.service import StageScoringService
from rubricate.steps.verifier import routes as step_routes
from rubricate.steps.verifier.service import StepJudgeService


def create_app(**settings: Unpack[ModelServerSettings]) -> FastAPI:
    """`settings`: the LLM and task settings (default: from the environment) and an injected
    backend (default: built at start-up from the LLM settings)."""
    return create_model_server_app(
        service="verifier",
        routers=[
            stage_routes.router,
            nugget_routes.router,
            reflection_routes.router,
            mining_routes.router,
            step_routes.router,
        ],
        services={
            stage_routes.STATE_NAME: StageScoringService.factory,
            nugget_routes.SERVICE_NAME: NuggetLabelService.factory,
            reflection_routes.STATE_NAME: ReflectionJudgeService.factory,
            mining_routes.SERVICE_NAME: MiningJudgeService.factory,
            step_routes.STATE_NAME: StepJudgeService.factory,
        },
        **settings,
    )
