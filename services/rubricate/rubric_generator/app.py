from fastapi import FastAPI

from rubricate.common.model_server import TaskSettings, create_model_server_app
from rubricate.llm.base import LLMBackend
from rubricate.llm.settings import LLMSettings
from rubricate.rubric_generator import mining_routes, step_routes
from rubricate.rubric_generator.mining_service import MiningGenerationService
from rubricate.rubric_generator.routes import router
from rubricate.rubric_generator.service import RubricGeneratorService
from rubricate.rubric_generator.step_service import StepRubricService


def create_app(
    *,
    llm: LLMSettings | None = None,
    tasks: TaskSettings | None = None,
    backend: LLMBackend | None = None,
) -> FastAPI:
    return create_model_server_app(
        service="rubric-generator",
        router=router,
        service_factory=lambda b, t, s: RubricGeneratorService(backend=b, tasks=t, llm=s),
        llm=llm,
        tasks=tasks,
        backend=backend,
        extra_routers=[mining_routes.router, step_routes.router],
        extra_services={
            mining_routes.SERVICE_NAME: MiningGenerationService.factory,
            step_routes.STATE_NAME: StepRubricService.factory,
        },
    )
