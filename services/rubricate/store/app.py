"""The store service app: `create_app(settings)`; `rubricate serve store` runs it."""

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from sqlalchemy.exc import OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError

from rubricate.audit.store import routes as history_routes
from rubricate.common.app import ReadinessCheck, create_service_app
from rubricate.common.cache import Cache, GuardedCache, MemoryCache, RedisCache
from rubricate.common.embeddings import Embedder
from rubricate.common.errors import ErrorMapping, ServiceError
from rubricate.db.engine import make_engine
from rubricate.db.migrate import upgrade_to_head
from rubricate.reflections.store import routes as bank_routes
from rubricate.reflections.store.service import build_bank_service
from rubricate.stagewise.store import routes as buffer_routes
from rubricate.stagewise.store.scorings import ScoringStore
from rubricate.stagewise.store.service import BufferCache, BufferStore
from rubricate.store.settings import StoreSettings
from rubricate.store.size_metrics import refresh_forever

log = logging.getLogger("rubricate.store")


def _database_unavailable(exc: Exception) -> ServiceError:
    return ServiceError(
        503,
        f"store database unavailable: {type(exc).__name__}",
        type="store_unavailable",
        headers={"Retry-After": "1"},
    )


DATABASE_ERRORS: ErrorMapping = {
    OperationalError: _database_unavailable,
    PoolTimeoutError: _database_unavailable,
}
"""The database being down or saturated is a 503 the caller may retry, not a 500: answered
once for every route of the store (buffers, bank, scorings, rubric history)."""

ROUTERS = (
    buffer_routes.router,
    buffer_routes.scorings_router,
    bank_routes.router,
    history_routes.router,
)
ERRORS: ErrorMapping = {
    **DATABASE_ERRORS,
    **buffer_routes.STAGEWISE_ERRORS,
    **bank_routes.BANK_ERRORS,
}
"""Every failure the store's routes let through, answered once for the app."""


def build_cache(settings: StoreSettings) -> GuardedCache:
    inner: Cache = (
        RedisCache(settings.redis_url, timeout_s=settings.redis_timeout_s)
        if settings.redis_url
        else MemoryCache()
    )
    return GuardedCache(inner)


async def _database_ready(app: FastAPI) -> tuple[bool, str]:
    store: BufferStore = app.state.store
    await asyncio.to_thread(store.ping)
    return True, "ok"


async def _cache_ready(app: FastAPI) -> tuple[bool, str]:
    cache: GuardedCache = app.state.cache
    if await cache.ping():
        return True, "ok"
    return False, "cache unreachable"


def create_app(
    settings: StoreSettings | None = None, *, embedder: Embedder | None = None
) -> FastAPI:
    """`embedder`: the bank's question embedder (default: the shared MiniLM model)."""
    settings = settings or StoreSettings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        engine = make_engine(
            settings.database_url,
            pool_size=settings.db_pool_size,
            max_overflow=settings.db_max_overflow,
            sqlite_busy_timeout_s=settings.sqlite_busy_timeout_s,
        )
        cache = build_cache(settings)
        try:
            if settings.auto_migrate:
                await asyncio.to_thread(upgrade_to_head, engine)
            store = BufferStore(engine)
            app.state.settings = settings
            app.state.engine = engine
            app.state.cache = cache
            app.state.store = store
            app.state.buffers = BufferCache(cache, ttl_s=settings.cache_ttl_s)
            app.state.scorings = ScoringStore(engine, retention_s=settings.scoring_retention_s)
            app.state.bank = build_bank_service(
                engine=engine, buffer_cache=cache, embedder=embedder
            )
            log.info(
                "store.started database=%s cache=%s",
                engine.url.render_as_string(hide_password=True),
                "redis" if settings.redis_url else "memory",
            )
            sizes = asyncio.create_task(refresh_forever(engine), name="store-size-metrics")
            try:
                yield
            finally:
                sizes.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await sizes
        finally:
            bank = getattr(app.state, bank_routes.STATE_NAME, None)
            if bank is not None:
                await asyncio.to_thread(bank.close)
            await cache.aclose()
            engine.dispose()

    readiness: list[tuple[str, ReadinessCheck]] = [("database", _database_ready)]
    if settings.cache_required:
        readiness.append(("cache", _cache_ready))
    return create_service_app(
        service="store",
        title="Rubricate store",
        routers=ROUTERS,
        lifespan=lifespan,
        readiness=readiness,
        max_body_bytes=settings.store_max_body_bytes,
        error_mappings=ERRORS,
    )
