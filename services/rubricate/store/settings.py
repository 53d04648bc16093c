"""Store settings (env prefix `RUBRICATE_`)."""

from pathlib import Path
from typing import Self

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from rubricate.db.urls import default_database_url, normalize_database_url


class StoreSettings(BaseSettings):
    """Store settings.

    Env: RUBRICATE_DATABASE_URL, RUBRICATE_DATA_DIR, RUBRICATE_REDIS_URL,
    RUBRICATE_CACHE_TTL_S, RUBRICATE_CACHE_REQUIRED, RUBRICATE_REDIS_TIMEOUT_S,
    RUBRICATE_DB_POOL_SIZE, RUBRICATE_DB_MAX_OVERFLOW, RUBRICATE_SQLITE_BUSY_TIMEOUT_S,
    RUBRICATE_AUTO_MIGRATE, RUBRICATE_STORE_MAX_BODY_BYTES, RUBRICATE_SCORING_RETENTION_S.
    """

    model_config = SettingsConfigDict(env_prefix="RUBRICATE_", extra="ignore")

    data_dir: Path = Path("var")
    """Where the default SQLite database lives (created if missing)."""
    database_url: str = ""
    """SQLAlchemy URL. Default: `sqlite:///<data_dir>/rubricate.db`. `postgresql://…` URLs
    are normalized to `postgresql+psycopg://…`."""
    redis_url: str | None = None
    """Redis for cached buffer reads; None: an in-process cache."""
    cache_ttl_s: float = Field(default=300.0, gt=0)
    redis_timeout_s: float = Field(default=0.5, gt=0)
    """Connect and socket timeout of Redis calls; a slow or dead cache is skipped."""
    cache_required: bool = False
    """Whether /readyz fails while the cache is unreachable. Off by default: without the
    cache every read goes to the database, so a cache outage degrades, never fails, the
    service (and a failing readiness probe would take every replica out at once)."""
    db_pool_size: int = Field(default=5, ge=1)
    db_max_overflow: int = Field(default=10, ge=0)
    sqlite_busy_timeout_s: float = Field(default=30.0, gt=0)
    """How long a SQLite writer waits for the write lock before failing."""
    auto_migrate: bool = True
    """Run the Alembic migrations to head at start-up (embedded mode; off in production,
    where `rubricate store migrate` runs once per release)."""
    store_max_body_bytes: int = Field(default=8 * 1024 * 1024, gt=0)
    scoring_retention_s: float = Field(default=7 * 24 * 3600.0, gt=0)
    """How long stored stagewise scorings stay referable by id."""

    @model_validator(mode="after")
    def _resolve_database_url(self) -> Self:
        if not self.database_url:
            self.data_dir.mkdir(parents=True, exist_ok=True)
            self.database_url = default_database_url(self.data_dir)
        else:
            self.database_url = normalize_database_url(self.database_url)
        return self
