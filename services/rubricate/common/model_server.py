"""What the two model servers (rubric-generator, verifier) share: backend lifecycle,
readiness, and the mapping of LLM-layer failures onto the one error shape."""

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Literal

from fastapi import APIRouter, FastAPI
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from rubricate.common.app import create_service_app
from rubricate.common.errors import ServiceError
from rubricate.common.schemas import UsageOut
from rubricate.llm.base import LLMBackend
from rubricate.llm.circuit import CircuitOpenError
from rubricate.llm.errors import BackendRequestError, LLMError, OutputParseError, TransportError
from rubricate.llm.factory import build_backend
from rubricate.llm.settings import LLMSettings


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
    one forward pass, scored as the expected score 2·p(yes). `auto`: `choices` where the
    backend can score choices (embedded), else `generate` (docs/judge-quality.md)."""


def backend_lifespan(
    *, factory: Callable[[], LLMBackend], injected: LLMBackend | None
) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """Build the backend at start-up (unless one was injected) and close what we built."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        backend = injected if injected is not None else factory()
        app.state.backend = backend
        try:
            yield
        finally:
            if injected is None:
                await backend.aclose()

    return lifespan


async def backend_ready(app: FastAPI) -> tuple[bool, str]:
    backend: LLMBackend | None = getattr(app.state, "backend", None)
    if backend is None:
        return False, "backend not started"
    ok = await backend.ready()
    return ok, "ok" if ok else f"{backend.name} backend not ready"


def as_service_error(exc: LLMError, *, task: str) -> ServiceError:
    usage = UsageOut.of(exc.usage)
    if isinstance(exc, OutputParseError):
        return ServiceError(
            502,
            f"{task}: the model's output was invalid after a repair retry: {exc}",
            type="judge_output_invalid",
            usage=usage,
        )
    if isinstance(exc, TransportError):
        wait = exc.retry_after_s if isinstance(exc, CircuitOpenError) else 5.0
        return ServiceError(
            503,
            f"{task}: the model backend is unavailable after retries: {exc}",
            type="backend_unavailable",
            usage=usage,
            headers={"Retry-After": str(max(1, round(wait)))},
        )
    if isinstance(exc, BackendRequestError):
        return ServiceError(
            422,
            f"{task}: the model backend rejected the request: {exc}",
            type="backend_rejected",
            usage=usage,
        )
    return ServiceError(502, f"{task}: {exc}", type="judge_error", usage=usage)


ServiceFactory = Callable[[LLMBackend, TaskSettings, LLMSettings], object]


def create_model_server_app(
    *,
    service: str,
    router: APIRouter,
    service_factory: ServiceFactory,
    llm: LLMSettings | None = None,
    tasks: TaskSettings | None = None,
    backend: LLMBackend | None = None,
    extra_routers: Sequence[APIRouter] = (),
    extra_services: Mapping[str, ServiceFactory] | None = None,
) -> FastAPI:
    """A model server: its task routers, service objects, the backend.

    The main service object lives on `app.state.service`; each of `extra_services` (one per
    task family, e.g. nugget labels or step verification) on `app.state.<name>`, all sharing
    the one backend.
    """
    llm_settings = llm or LLMSettings()
    task_settings = tasks or TaskSettings()
    backend_cm = backend_lifespan(factory=lambda: build_backend(llm_settings), injected=backend)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with backend_cm(app):
            app.state.service = service_factory(app.state.backend, task_settings, llm_settings)
            for name, factory in (extra_services or {}).items():
                setattr(app.state, name, factory(app.state.backend, task_settings, llm_settings))
            yield

    return create_service_app(
        service=service,
        title=f"Rubricate {service}",
        routers=[router, *extra_routers],
        lifespan=lifespan,
        readiness=[("backend", backend_ready)],
    )
