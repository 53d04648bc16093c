from fastapi import FastAPI

from rubricate.llm.base import LLMBackend
from rubricate.llm.server import TaskSettings, create_model_server_app
from rubricate.llm.settings import LLMSettings
from rubricate.mining.generator import routes as mining_routes
from rubricate.mining.generator.service import MiningGenerationService
from rubricate.stagewise.generator.routes import router
from rubricate.stagewise.generator.service import RubricGeneratorService
from rubricate.steps.generator import routes as step_routes
from rubricate.steps.generator.service import StepRubricService


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
