from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
from fastapi import FastAPI
from starlette.middleware import Middleware

from rubricate.common.app import create_service_app
from rubricate.gateway import miner_routes, nugget_routes, reflection_routes, trainer_routes
from rubricate.gateway.bank_proxy import BankProxy
from rubricate.gateway.clients import ServiceClient
from rubricate.gateway.idempotency import (
    IdempotencyMiddleware,
    IdempotencyStore,
    MemoryIdempotencyStore,
    RedisIdempotencyStore,
)
from rubricate.gateway.nuggets import NuggetService, NuggetSettings
from rubricate.gateway.reflections import ReflectionService, ReflectionSettings
from rubricate.gateway.routes import router
from rubricate.gateway.rpc_lifespan import start_grpc
from rubricate.gateway.settings import GatewaySettings
from rubricate.gateway.stagewise import StagewiseService, Upstreams
from rubricate.gateway.step_routes import router as step_router
from rubricate.gateway.steps import StepSettings, StepsService
from rubricate.gateway.tenant_limits import TenantConcurrencyMiddleware


def build_upstreams(
    settings: GatewaySettings, *, transport: httpx.AsyncBaseTransport | None = None
) -> Upstreams:
    def client(service: str, url: str, timeout: float) -> ServiceClient:
        return ServiceClient(
            service=service,
            base_url=url,
            timeout_s=timeout,
            retries=settings.upstream_retries,
            transport=transport,
        )

    return Upstreams(
        generator=client(
            "rubric-generator", settings.rubric_generator_url, settings.model_timeout_s
        ),
        verifier=client("verifier", settings.verifier_url, settings.model_timeout_s),
        store=client("store", settings.store_url, settings.store_timeout_s),
    )


async def _upstreams_ready(app: FastAPI) -> tuple[bool, str]:
    up: Upstreams = app.state.stagewise.up
    found = [await c.problem() for c in (up.generator, up.verifier, up.store)]
    problems = [p for p in found if p]
    return not problems, "; ".join(problems) or "ok"


def build_idempotency_store(cfg: GatewaySettings) -> IdempotencyStore:
    return RedisIdempotencyStore(cfg.redis_url) if cfg.redis_url else MemoryIdempotencyStore()


def create_app(settings: GatewaySettings | None = None) -> FastAPI:
    cfg = settings or GatewaySettings()
    idempotency = build_idempotency_store(cfg)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        upstreams = build_upstreams(cfg)
        app.state.stagewise = StagewiseService(upstreams=upstreams, settings=cfg)
        app.state.steps = StepsService(upstreams=upstreams, settings=StepSettings(), gateway=cfg)
        app.state.nuggets = NuggetService(verifier=upstreams.verifier, settings=NuggetSettings())
        app.state.reflections = ReflectionService(
            verifier=upstreams.verifier,
            store=upstreams.store,
            settings=cfg,
            reflection=ReflectionSettings(),
        )
        app.state.bank_proxy = BankProxy(cfg)
        setattr(app.state, miner_routes.STATE_NAME, miner_routes.MinerClient(cfg))
        grpc_server = await start_grpc(app, cfg)
        try:
            yield
        finally:
            if grpc_server is not None:
                await grpc_server.stop()
            await app.state.steps.aclose()
            await app.state.bank_proxy.aclose()
            await getattr(app.state, miner_routes.STATE_NAME).aclose()
            await upstreams.aclose()
            await idempotency.aclose()

    return create_service_app(
        service="gateway",
        title="Rubricate gateway",
        routers=[
            router,
            trainer_routes.router,
            nugget_routes.router,
            step_router,
            reflection_routes.router,
            miner_routes.router,
        ],
        lifespan=lifespan,
        readiness=[("upstreams", _upstreams_ready)],
        max_body_bytes=cfg.max_body_bytes,
        middleware=[
            Middleware(
                IdempotencyMiddleware,
                store=idempotency,
                ttl_s=cfg.idempotency_ttl_s,
                wait_s=cfg.model_timeout_s,
            ),
            Middleware(TenantConcurrencyMiddleware, max_in_flight=cfg.max_in_flight_per_tenant),
        ],
    )
