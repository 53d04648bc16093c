"""The gateway app: `create_app(settings)`; `rubricate serve gateway` runs it."""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
from fastapi import APIRouter, FastAPI
from starlette.middleware import Middleware

from rubricate.audit.gateway import routes as audit_routes
from rubricate.audit.gateway.service import AuditSubmitter
from rubricate.audit.settings import AuditSettings
from rubricate.common.app import Drain, create_service_app
from rubricate.common.deadlines import DeadlineMiddleware
from rubricate.common.idempotency import (
    IdempotencyMiddleware,
    IdempotencyStore,
    MemoryIdempotencyStore,
    RedisIdempotencyStore,
)
from rubricate.common.tenant_limits import TenantConcurrencyMiddleware
from rubricate.common.token_routes import router as token_router
from rubricate.common.upstream import RETRY_STATUSES, ServiceClient, Upstreams
from rubricate.console.routes import PREFIX as CONSOLE_PREFIX
from rubricate.console.routes import router as console_router
from rubricate.console.settings import ConsoleSettings
from rubricate.gateway.drain import InFlight, InFlightMiddleware, serve_on_while_alone
from rubricate.gateway.grpc import start_grpc
from rubricate.gateway.settings import GatewaySettings
from rubricate.mining.gateway import routes as miner_routes
from rubricate.nuggets.gateway import routes as nugget_routes
from rubricate.nuggets.gateway.service import NuggetService, NuggetSettings
from rubricate.reflections.gateway import routes as reflection_routes
from rubricate.reflections.gateway.bank_proxy import BankProxy
from rubricate.reflections.gateway.service import ReflectionService, ReflectionSettings
from rubricate.rewards.gateway import routes as trainer_routes
from rubricate.rewards.gateway.assembly import GroupAssembler, build_assembler
from rubricate.rewards.gateway.service import RewardCapabilities, TrainerRewards
from rubricate.stagewise.gateway.routes import router
from rubricate.stagewise.gateway.service import StagewiseService
from rubricate.steps.gateway.routes import router as step_router
from rubricate.steps.gateway.service import StepSettings, StepsService
from rubricate_client.schemas.stagewise import StagewiseScoreRequest, StagewiseScoreResponse


def build_upstreams(
    settings: GatewaySettings, *, transport: httpx.AsyncBaseTransport | None = None
) -> Upstreams:
    def client(
        service: str,
        url: str,
        timeout: float,
        retry_statuses: frozenset[int] = RETRY_STATUSES,
        connect_wait_s: float = settings.upstream_connect_wait_s,
    ) -> ServiceClient:
        return ServiceClient(
            service=service,
            base_url=url,
            timeout_s=timeout,
            retries=settings.upstream_retries,
            retry_statuses=retry_statuses,
            transport=transport,
            connect_wait_s=connect_wait_s,
        )

    return Upstreams(
        generator=client(
            "rubric-generator", settings.rubric_generator_url, settings.model_timeout_s
        ),
        verifier=client("verifier", settings.verifier_url, settings.model_timeout_s),
        store=client("store", settings.store_url, settings.store_timeout_s),
        # job routes: a 503 from the miner is handed on, not retried; and the audit's
        # hand-over to it must not wait
        miner=client("miner", settings.miner_url, settings.store_timeout_s, frozenset(), 0.0),
    )


async def _upstreams_ready(app: FastAPI) -> tuple[bool, str]:
    up: Upstreams = app.state.upstreams
    found = [await c.problem() for c in (up.generator, up.verifier, up.store)]
    problems = [p for p in found if p]
    return not problems, "; ".join(problems) or "ok"


def build_idempotency_store(cfg: GatewaySettings) -> IdempotencyStore:
    return RedisIdempotencyStore(cfg.redis_url) if cfg.redis_url else MemoryIdempotencyStore()


def create_app(settings: GatewaySettings | None = None) -> FastAPI:
    """The gateway app, in steps: 1. settings; 2. the idempotency store (its middleware and
    the shutdown share it); 3. at start-up (`lifespan`) the upstream clients, the capability
    services and the trainer's rewards, then the gRPC server, closed again in reverse at
    shutdown; 4. the routers; 5. the middleware."""
    # 1. settings
    cfg = settings or GatewaySettings()
    console = ConsoleSettings()
    # 2. the idempotency store
    idempotency = build_idempotency_store(cfg)
    drain = Drain()  # SIGTERM: /readyz says draining, the assembler answers what it holds
    in_flight = InFlight()  # the requests a draining only replica serves before it stops

    # 3. upstream clients, services and the gRPC server, for the app's lifetime
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        upstreams = build_upstreams(cfg)
        app.state.upstreams = upstreams
        audit_submitter = AuditSubmitter(upstreams.miner if AuditSettings().enabled else None)
        _add_services(app, cfg, upstreams, audit_submitter)
        assembler = _add_trainer_rewards(app, cfg)
        # the only live replica serves on until idle before it stops listening (no one
        # to hand over to); otherwise, and then, what gathers is handed over
        drain.holds.append(
            lambda: serve_on_while_alone(
                assembler.rendezvous,
                in_flight,
                quiet_s=cfg.drain_quiet_s,
                hold_s=cfg.drain_hold_s,
            )
        )
        drain.hooks.append(lambda: assembler.drain(grace_s=2 * cfg.model_timeout_s))
        grpc_server = await start_grpc(app, cfg)
        try:
            yield
        finally:
            await drain.finish()  # the groups this replica scores are answered first
            if grpc_server is not None:
                await grpc_server.stop()
            await assembler.aclose()
            await app.state.steps.aclose()
            await audit_submitter.drain()
            await upstreams.aclose()
            await idempotency.aclose()

    app = create_service_app(
        service="gateway",
        title="Rubricate gateway",
        routers=_routers(console),  # 4.
        lifespan=lifespan,
        readiness=[("upstreams", _upstreams_ready)],
        max_body_bytes=cfg.max_body_bytes,
        own_session_prefixes=(CONSOLE_PREFIX,) if console.enabled else (),
        middleware=_middleware(cfg, idempotency),  # 5.
        drain=drain,
    )
    app.state.console_settings = console  # the settings the console's routes read
    app.add_middleware(InFlightMiddleware, in_flight=in_flight)  # outermost
    return app


def _add_services(
    app: FastAPI, cfg: GatewaySettings, upstreams: Upstreams, audit_submitter: AuditSubmitter
) -> None:
    """Each capability's gateway service on `app.state`, on the shared upstream clients;
    stagewise scorings and the other kinds' judge-addressing reports go to the audit."""
    app.state.stagewise = StagewiseService(
        upstreams=upstreams, settings=cfg, after_scoring=audit_submitter
    )
    flagged = audit_submitter.addressing  # judge-addressing reports of the other kinds
    app.state.steps = StepsService(
        upstreams=upstreams, settings=StepSettings(), gateway=cfg, audit=flagged
    )
    app.state.nuggets = NuggetService(
        verifier=upstreams.verifier, settings=NuggetSettings(), audit=flagged
    )
    app.state.reflections = ReflectionService(
        verifier=upstreams.verifier,
        store=upstreams.store,
        settings=cfg,
        reflection=ReflectionSettings(),
        audit=flagged,
    )
    app.state.bank_proxy = BankProxy(upstreams.store)


def _add_trainer_rewards(app: FastAPI, cfg: GatewaySettings) -> GroupAssembler:
    """`/get_reward`'s service on `app.state`, calling the capability services of
    `_add_services`; returns its group assembler (closed at shutdown)."""
    stagewise: StagewiseService = app.state.stagewise

    async def score_stagewise(
        request: StagewiseScoreRequest, tenant: str
    ) -> StagewiseScoreResponse:
        return await stagewise.score(request, tenant=tenant)

    capabilities = RewardCapabilities(  # what the kinds' public routes call
        score_stagewise=score_stagewise,
        verify_nuggets=app.state.nuggets.verify_batch,
        score_steps=app.state.steps.score,
    )
    assembler = build_assembler(
        redis_url=cfg.redis_url,
        gather_s=cfg.group_gather_s,
        retention_s=cfg.reward_retention_s,
        wait_s=2 * cfg.model_timeout_s,
        lease_s=cfg.group_lease_s,
    )
    setattr(
        app.state,
        trainer_routes.STATE_NAME,
        TrainerRewards(
            capabilities=capabilities,
            default_kind=cfg.reward_kind,
            group_concurrency=cfg.reward_group_concurrency,
            assembler=assembler,
            group_size=cfg.group_size,
            max_trajectory_chars=cfg.max_trajectory_chars,
        ),
    )
    return assembler


def _routers(console: ConsoleSettings) -> list[APIRouter]:
    """Every capability's public routes, the token route, and the console when enabled."""
    return [
        router,
        trainer_routes.router,
        nugget_routes.router,
        step_router,
        reflection_routes.router,
        miner_routes.router,
        audit_routes.router,
        token_router,
        *([console_router] if console.enabled else []),
    ]


def _middleware(cfg: GatewaySettings, idempotency: IdempotencyStore) -> list[Middleware]:
    """Outermost first: idempotent replays, the per-tenant admission, the deadline."""
    return [
        Middleware(
            IdempotencyMiddleware,
            store=idempotency,
            ttl_s=cfg.idempotency_ttl_s,
            wait_s=cfg.model_timeout_s,
            lease_s=cfg.idempotency_lease_s,
        ),
        Middleware(TenantConcurrencyMiddleware, max_in_flight=cfg.max_in_flight_per_tenant),
        # innermost: the caller's X-Rubricate-Deadline bounds the work and every
        # upstream call (common.upstream); a passed deadline is a 504, never a score
        Middleware(DeadlineMiddleware),
    ]
