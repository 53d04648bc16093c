from fastapi import FastAPI

from rubricate.llm.base import LLMBackend
from rubricate.llm.server import TaskSettings, create_model_server_app
from rubricate.llm.settings import LLMSettings
from rubricate.mining.verifier import routes as mining_routes
from rubricate.mining.verifier.service import MiningJudgeService
from rubricate.nuggets.verifier import routes as nugget_routes
from rubricate.nuggets.verifier.service import NuggetLabelService
from rubricate.reflections.verifier import routes as reflection_routes
from rubricate.reflections.verifier.service import ReflectionJudgeService
from rubricate.stagewise.verifier.routes import router
from rubricate.stagewise.verifier.service import VerifierService
from rubricate.steps.verifier import routes as step_routes
from rubricate.steps.verifier.service import StepJudgeService


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
