"""The rubric-generator model server: every generation task family, registered as equals
on one backend (stage rubrics, mining generations, step rubrics)."""

from typing import Unpack

from fastapi import FastAPI

from rubricate.llm.server import ModelServerSettings, create_model_server_app
from rubricate.mining.generator import routes as mining_routes
from rubricate.mining.generator.service import MiningGenerationService
from rubricate.stagewise.generator import routes as stage_routes
from rubricate.stagewise.generator.service import StageRubricService
from rubricate.steps.generator import routes as step_routes
from rubricate.steps.generator.service import StepRubricService


def create_app(**settings: Unpack[ModelServerSettings]) -> FastAPI:
    """`settings`: the LLM and task settings (default: from the environment) and an injected
    backend (default: built at start-up from the LLM settings)."""
    return create_model_server_app(
        service="rubric-generator",
        routers=[stage_routes.router, mining_routes.router, step_routes.router],
        services={
            stage_routes.STATE_NAME: StageRubricService.factory,
            mining_routes.SERVICE_NAME: MiningGenerationService.factory,
            step_routes.STATE_NAME: StepRubricService.factory,
        },
        **settings,
    )
