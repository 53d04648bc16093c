from fastapi import FastAPI

from rubricate.common.model_server import TaskSettings, create_model_server_app
from rubricate.llm.base import LLMBackend
from rubricate.llm.settings import LLMSettings
from rubricate.verifier import mining_routes, nugget_routes, reflection_routes, step_routes
from rubricate.verifier.mining_service import MiningJudgeService
from rubricate.verifier.nuggets import NuggetLabelService
from rubricate.verifier.reflection_service import ReflectionJudgeService
from rubricate.verifier.routes import router
from rubricate.verifier.service import VerifierService
from rubricate.verifier.step_service import StepJudgeService


def create_app(
    *,
    llm: LLMSettings | None = None,
    tasks: TaskSettings | None = None,
    backend: LLMBackend | None = None,
) -> FastAPI:
    return create_model_server_app(
        service="verifier",
        router=router,
        service_factory=lambda b, t, s: VerifierService(backend=b, tasks=t, llm=s),
        llm=llm,
        tasks=tasks,
        backend=backend,
        extra_routers=[
            nugget_routes.router,
            reflection_routes.router,
            mining_routes.router,
            step_routes.router,
        ],
        extra_services={
            nugget_routes.SERVICE_NAME: NuggetLabelService.factory,
            mining_routes.SERVICE_NAME: MiningJudgeService.factory,
            step_routes.STATE_NAME: StepJudgeService.factory,
            reflection_routes.STATE_NAME: lambda b, t, s: ReflectionJudgeService(
                backend=b, tasks=t, llm=s
            ),
        },
    )
