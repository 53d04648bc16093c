"""Miner settings (env prefix RUBRICATE_MINER_, plus the shared RUBRICATE_* names)."""

from pathlib import Path
from typing import Self

from pydantic import AliasChoices, Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from rubricate.common.embeddings import DEFAULT_EMBEDDING_MODEL
from rubricate.db.urls import DEFAULT_DB_FILE, normalize_database_url


class MinerSettings(BaseSettings):
    """Env: RUBRICATE_MINER_* for each field, except where noted in the field's doc."""

    model_config = SettingsConfigDict(
        env_prefix="RUBRICATE_MINER_", extra="ignore", populate_by_name=True
    )

    data_dir: Path = Field(
        default=Path("var"),
        validation_alias=AliasChoices("RUBRICATE_MINER_DATA_DIR", "RUBRICATE_DATA_DIR"),
    )
    """Default home of the SQLite database and of Qdrant's local-mode files."""
    database_url: str = Field(
        default="",
        validation_alias=AliasChoices("RUBRICATE_MINER_DATABASE_URL", "RUBRICATE_DATABASE_URL"),
    )
    """Jobs, corpora and mined nuggets (the store's database and migrations)."""
    auto_migrate: bool = Field(
        default=True,
        validation_alias=AliasChoices("RUBRICATE_MINER_AUTO_MIGRATE", "RUBRICATE_AUTO_MIGRATE"),
    )
    broker_url: str | None = Field(
        default=None,
        validation_alias=AliasChoices("RUBRICATE_MINER_BROKER_URL", "RUBRICATE_REDIS_URL"),
    )
    """Celery's Redis broker. None: tasks run eagerly in the API process (embedded mode)."""
    eager: bool = False
    """Run Celery tasks in process (in a background thread per job) even with a broker."""
    queue: str = "rubricate-miner"
    qdrant_url: str | None = Field(
        default=None,
        validation_alias=AliasChoices("RUBRICATE_MINER_QDRANT_URL", "RUBRICATE_QDRANT_URL"),
    )
    """A Qdrant server. None: Qdrant's local mode under `qdrant_path` (one process only)."""
    qdrant_path: Path | None = None
    """Default: `<data_dir>/qdrant`."""
    qdrant_api_key: str | None = None
    embedding_model: str = Field(
        default=DEFAULT_EMBEDDING_MODEL,
        validation_alias=AliasChoices(
            "RUBRICATE_MINER_EMBEDDING_MODEL", "RUBRICATE_EMBEDDING_MODEL"
        ),
    )
    rubric_generator_url: str = "http://127.0.0.1:8001"
    verifier_url: str = "http://127.0.0.1:8002"
    model_timeout_s: float = Field(default=900.0, gt=0)
    judge_retries: int = Field(default=3, ge=0, le=10)
    """Retries of a model-server call on connection errors and 503/504, with backoff."""
    judge_concurrency: int = Field(default=4, ge=1, le=64)
    """Judge calls in flight per job (temporal checks of one retrieval, extractions)."""
    lease_s: float = Field(default=120.0, gt=0)
    """A running job whose heartbeat is older than this is taken over by another worker."""
    heartbeat_s: float = Field(default=10.0, gt=0)
    visibility_timeout_s: int = Field(default=3600, ge=1)
    """Redis transport: an unacknowledged message is redelivered after this long."""
    ingest_batch: int = Field(default=64, ge=1)
    """Passages embedded and upserted per ingestion step."""
    max_body_bytes: int = Field(default=32 * 1024 * 1024, gt=0)
    max_documents: int = Field(default=50_000, ge=1)
    ingest_roots: list[Path] = Field(default_factory=list)
    """Server-side directories `POST /v1/corpora` may read a `path` from (JSON list)."""

    @model_validator(mode="after")
    def _resolve(self) -> Self:
        if not self.database_url:
            self.data_dir.mkdir(parents=True, exist_ok=True)
            self.database_url = f"sqlite:///{self.data_dir / DEFAULT_DB_FILE}"
        else:
            self.database_url = normalize_database_url(self.database_url)
        if self.qdrant_path is None:
            self.qdrant_path = self.data_dir / "qdrant"
        if self.lease_s <= self.heartbeat_s:
            raise ValueError("lease_s must be longer than heartbeat_s")
        return self

    @property
    def runs_eagerly(self) -> bool:
        return self.eager or not self.broker_url
