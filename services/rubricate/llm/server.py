"""What the two model servers (rubric-generator, verifier) share: backend lifecycle,
readiness, request deadlines, their task services (registered as equals, one `app.state`
attribute each), and the mapping of LLM-layer failures onto the one error shape.

At start-up a backend that claims choice scoring is asked once whether it really can
(`LLMBackend.choice_scoring_problem`: an OpenAI-compatible server must return
log-probabilities). If not, one line says so and the choice-scoring designs are off for
that backend (an explicit `choices` stops the server).
Requests carry their caller's deadline (`X-Rubricate-Deadline`, `common.deadlines`): every
judge call gets the time left, and a request whose deadline passes is answered 504
`deadline_exceeded`, its remaining calls dropped.
"""

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Annotated, Any, Literal, NamedTuple, TypedDict

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict
from starlette.middleware import Middleware

from rubricate.common.app import create_service_app
from rubricate.common.deadlines import DeadlineMiddleware
from rubricate.common.errors import ServiceError, service_error_json
from rubricate.common.routing import state_service
from rubricate.common.usage import usage_out
from rubricate.llm.base import LLMBackend
from rubricate.llm.errors import (
    BackendRequestError,
    DeadlineExceeded,
    LLMError,
    OutputParseError,
    TransportError,
)
from rubricate.llm.factory import build_backend
from rubricate.llm.settings import LLMSettings
from rubricate_client.endpoints import Endpoint

log = logging.getLogger("rubricate.llm.server")


class TaskSettings(BaseSettings):
    """Prompt budgets and decoding for judge tasks (env prefix RUBRICATE_TASK_)."""

    model_config = SettingsConfigDict(env_prefix="RUBRICATE_TASK_", extra="ignore")

    max_chars_per_stage: int = Field(default=6000, ge=200)
    """Each stage's text is clipped (head and tail kept) to this many characters."""
    generation_max_tokens: int = Field(default=1200, ge=64)
    scoring_max_tokens: int = Field(default=1500, ge=64)
    generation_temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    scoring_temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    scoring_design: Literal["auto", "generate", "choices"] = "auto"
    """How the verifier scores stagewise rubrics. `generate`: one JSON score sheet per
    trajectory (0/1/2 and a justification per rubric). `choices`: per rubric, p(yes) from
    one forward pass, scored as the expected score 2·p(yes). `auto`: `choices` on the
    embedded backend, `generate` on served ones, by measurement (docs/llm.md, "Choosing the
    scoring design"); `choices` on a served backend needs one returning log-probabilities."""
    unit_reading: Literal["auto", "model", "cues", "off"] = "auto"
    """How answers are read before any judge sees them (`llm.assertions`, docs/verifier.md,
    "Assertion units"). `cues`: closed-class cues of grammar decide what a unit does (a
    hedge, a denial, a question, a supposition, a distancing report, talk about the text or
    its grading, a heading, an opener), any other unit is an assertion; no model call.
    `model`: the same cues, then the judge model says whether each other unit is content
    or talk about the text (one choices pass per unit where the backend scores choices with
    a per-slot prefix cache, else one structured call per text). `auto`: `cues` on the
    embedded backend, whose 1.5B model told content from talk about the text no better than
    chance (docs/verifier.md), `model` on every other backend. `off`: no units, the text as
    written (the defence switched off, for comparison: `rubricate eval hacking`)."""


def backend_lifespan(
    *, factory: Callable[[], LLMBackend], injected: LLMBackend | None
) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """Build the backend at start-up (unless one was injected) and close what we built."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        backend = injected if injected is not None else factory()
        app.state.backend = backend
        try:
            await check_choice_scoring(backend)
            yield
        finally:
            if injected is None:
                await backend.aclose()

    return lifespan


async def check_choice_scoring(backend: LLMBackend) -> None:
    """Ask a backend that claims choice scoring whether it can; if not, log why in one line
    and withdraw the claim, so the tasks' `auto` designs fall back to `generate`."""
    if not backend.supports_choice_scoring:
        return
    problem = await backend.choice_scoring_problem()
    if problem is not None:
        log.error(
            "llm.no_choice_scoring backend=%s: %s; the choices designs are off "
            "(scoring uses generate)",
            backend.name,
            problem,
        )
        backend.supports_choice_scoring = False


async def backend_ready(app: FastAPI) -> tuple[bool, str]:
    backend: LLMBackend | None = getattr(app.state, "backend", None)
    if backend is None:
        return False, "backend not started"
    ok = await backend.ready()
    return ok, "ok" if ok else f"{backend.name} backend not ready"


_FAILURES: tuple[tuple[type[LLMError], int, str, str], ...] = (
    (DeadlineExceeded, 504, "{task}: {exc}; the request's work was dropped", "deadline_exceeded"),
    (
        OutputParseError,
        502,
        "{task}: the model's output was invalid after a repair retry: {exc}",
        "judge_output_invalid",
    ),
    (
        TransportError,
        503,
        "{task}: the model backend is unavailable after retries: {exc}",
        "backend_unavailable",
    ),
    (
        BackendRequestError,
        422,
        "{task}: the model backend rejected the request: {exc}",
        "backend_rejected",
    ),
)
"""Each kind of model failure as (status, message, error type); any other is a 502
`judge_error`."""


def as_service_error(exc: LLMError, *, task: str) -> ServiceError:
    """`exc` in the one error shape, its message led by the `task` that failed, with the
    usage it spent; a transport failure says when to retry (its Retry-After, else 5 s)."""
    status, message, kind = next(
        ((s, m, k) for cls, s, m, k in _FAILURES if isinstance(exc, cls)),
        (502, "{task}: {exc}", "judge_error"),
    )
    headers = None
    if isinstance(exc, TransportError):
        wait = exc.retry_after_s if exc.retry_after_s is not None else 5.0
        headers = {"Retry-After": str(max(1, round(wait)))}
    return ServiceError(
        status,
        message.format(task=task, exc=exc),
        type=kind,
        usage=usage_out(exc.usage),
        headers=headers,
    )


ServiceFactory = Callable[[LLMBackend, TaskSettings, LLMSettings], object]
"""Builds one task service from the server's backend and settings (e.g. `TaskService.factory`)."""


class ModelServerSettings(TypedDict, total=False):
    """What a model server's `create_app` takes (each optional)."""

    llm: LLMSettings | None
    tasks: TaskSettings | None
    backend: LLMBackend | None


def create_model_server_app(
    *,
    service: str,
    routers: Sequence[APIRouter],
    services: Mapping[str, ServiceFactory],
    llm: LLMSettings | None = None,
    tasks: TaskSettings | None = None,
    backend: LLMBackend | None = None,
) -> FastAPI:
    """A model server: its task routers, its task services, the backend.

    Each of `services` (one per task family: stage scores, nugget labels, step verdicts,
    ...) is built at start-up and lives on `app.state.<name>`, all sharing the one backend;
    a route reaches its own with `Depends(task_service(name))`.
    """
    llm_settings = llm or LLMSettings()
    task_settings = tasks or TaskSettings()
    backend_cm = backend_lifespan(factory=lambda: build_backend(llm_settings), injected=backend)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with backend_cm(app):
            for name, factory in services.items():
                setattr(app.state, name, factory(app.state.backend, task_settings, llm_settings))
            yield

    app = create_service_app(
        service=service,
        title=f"Rubricate {service}",
        routers=routers,
        lifespan=lifespan,
        readiness=[("backend", backend_ready)],
        middleware=[Middleware(DeadlineMiddleware)],
    )
    app.add_exception_handler(LLMError, model_failure_json)
    return app


def task_service(name: str) -> Callable[[Request], Any]:
    """A route dependency: the task service registered as `name` (`app.state.<name>`)."""
    return state_service(object, name)


class TaskRoute(NamedTuple):
    """One task route: `endpoint` (declared in the capability's `endpoints` module),
    answered by `method` of the task service (an unbound method, e.g.
    `StageScoringService.stage_scores`); `description` is the route's OpenAPI description."""

    endpoint: Endpoint[Any, Any]
    method: Callable[[Any, Any], Awaitable[Any]]
    description: str | None = None


def task_router(service: str, *routes: TaskRoute, tags: Sequence[str] = ("tasks",)) -> APIRouter:
    """The routes of one task family, answered by the task service registered as `service`
    (`task_service`): each `POST endpoint.path`, named `endpoint.name` (the task's label,
    which a model failure's message leads with), its body an `endpoint.request`, answered
    with an `endpoint.response` by `method(service, body)`."""
    router = APIRouter(tags=list(tags))
    for route in routes:
        router.add_api_route(
            route.endpoint.path,
            _task_endpoint(route, Depends(task_service(service))),
            methods=["POST"],
            name=route.endpoint.name,
            response_model=route.endpoint.response,
            description=route.description,
        )
    return router


def _task_endpoint(route: TaskRoute, dependency: Any) -> Callable[..., Awaitable[Any]]:
    """The route function of `route`: its body typed as the endpoint's request model (so
    FastAPI validates and documents it), its task service from `dependency`."""
    method = route.method

    async def endpoint(body: Any, service: Annotated[Any, dependency]) -> Any:
        return await method(service, body)

    endpoint.__annotations__["body"] = route.endpoint.request
    endpoint.__annotations__["return"] = route.endpoint.response
    endpoint.__name__ = endpoint.__qualname__ = route.endpoint.name
    return endpoint


async def model_failure_json(request: Request, exc: Exception) -> JSONResponse:
    """A task's model failure in the one error shape (`as_service_error`), answered once per
    model server: the task is the name its route is registered under."""
    assert isinstance(exc, LLMError)
    route = request.scope.get("route")
    task = getattr(route, "name", None) or request.url.path
    return service_error_json(request, as_service_error(exc, task=task))
