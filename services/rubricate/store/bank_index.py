"""Question embeddings of the bank in Qdrant (RubricEM App. D.5: inner-product top-k).

Local mode (a folder under the store's data dir, no server) by default; a Qdrant server
when `RUBRICATE_QDRANT_URL` is set. One collection for every tenant; each point carries its
tenant and question hash, and every search filters on the tenant. The point id derives from
(tenant, question hash), so writing a question twice keeps one point. Blocking API: call it
from a worker thread in async code.
"""

import contextlib
import logging
import threading
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict
from qdrant_client import QdrantClient, models

log = logging.getLogger("rubricate.store.bank")

_POINT_NS = uuid.UUID("6f1d3c52-2a9e-4f7b-9c1e-52b4a1d0e7aa")


class BankSettings(BaseSettings):
    """Bank settings (env prefix RUBRICATE_).

    Env: RUBRICATE_QDRANT_URL, RUBRICATE_QDRANT_API_KEY, RUBRICATE_QDRANT_PATH,
    RUBRICATE_BANK_COLLECTION, RUBRICATE_SCORING_RETENTION_S.
    """

    model_config = SettingsConfigDict(env_prefix="RUBRICATE_", extra="ignore")

    qdrant_url: str | None = None
    """A Qdrant server (`http://qdrant:6333`); None: local mode under `qdrant_path`."""
    qdrant_api_key: str | None = None
    qdrant_path: Path | None = None
    """Local-mode folder. Default: `<data_dir>/qdrant-bank`."""
    bank_collection: str = Field(default="rubricate_bank", pattern=r"^[A-Za-z0-9_\-]+$")
    scoring_retention_s: float = Field(default=7 * 24 * 3600.0, gt=0)
    """How long stored stagewise scorings stay referable by id."""


def point_id(tenant: str, question_hash: str) -> str:
    return str(uuid.uuid5(_POINT_NS, f"{tenant}:{question_hash}"))


def _tenant_filter(tenant: str, *, exclude_hash: str | None = None) -> models.Filter:
    must: list[Any] = [models.FieldCondition(key="tenant", match=models.MatchValue(value=tenant))]
    must_not: list[Any] = []
    if exclude_hash is not None:
        must_not.append(
            models.FieldCondition(key="question_hash", match=models.MatchValue(value=exclude_hash))
        )
    return models.Filter(must=must, must_not=must_not or None)


class BankIndex:
    """The vector index of bank questions."""

    def __init__(self, client: QdrantClient, *, collection: str, dim: int, server: bool) -> None:
        self.client = client
        self.collection = collection
        self.dim = dim
        self.server = server
        self._ready = False
        self._lock = threading.Lock()
        self._local_lock = threading.Lock()

    @contextlib.contextmanager
    def _op(self) -> Iterator[None]:
        """Local mode is one in-process engine: one operation at a time."""
        self.ensure()
        if self.server:
            yield
            return
        with self._local_lock:
            yield

    @classmethod
    def open(cls, settings: BankSettings, *, data_dir: Path, dim: int) -> "BankIndex":
        if settings.qdrant_url:
            client = QdrantClient(url=settings.qdrant_url, api_key=settings.qdrant_api_key)
            return cls(client, collection=settings.bank_collection, dim=dim, server=True)
        path = settings.qdrant_path or data_dir / "qdrant-bank"
        path.mkdir(parents=True, exist_ok=True)
        client = QdrantClient(path=str(path))
        return cls(client, collection=settings.bank_collection, dim=dim, server=False)

    def ensure(self) -> None:
        """Create the collection (inner product over `dim`-vectors) unless it exists."""
        if self._ready:
            return
        with self._lock:
            if self._ready:
                return
            if not self.client.collection_exists(self.collection):
                self.client.create_collection(
                    self.collection,
                    vectors_config=models.VectorParams(size=self.dim, distance=models.Distance.DOT),
                )
                if self.server:  # payload indexes only matter (and only exist) on a server
                    for key in ("tenant", "question_hash"):
                        self.client.create_payload_index(
                            self.collection,
                            field_name=key,
                            field_schema=models.PayloadSchemaType.KEYWORD,
                        )
            self._ready = True

    def upsert(
        self, tenant: str, items: Sequence[tuple[str, Sequence[float]]], *, batch: int = 512
    ) -> None:
        """(question hash, vector) pairs of `tenant`."""
        for start in range(0, len(items), batch):
            points = [
                models.PointStruct(
                    id=point_id(tenant, qhash),
                    vector=list(vector),
                    payload={"tenant": tenant, "question_hash": qhash},
                )
                for qhash, vector in items[start : start + batch]
            ]
            with self._op():
                self.client.upsert(self.collection, points=points, wait=True)

    def search(
        self, tenant: str, vector: Sequence[float], *, k: int, exclude_hash: str | None
    ) -> list[tuple[str, float]]:
        """Top-k (question hash, inner product) of `tenant`, never `exclude_hash`."""
        with self._op():
            found = self.client.query_points(
                self.collection,
                query=list(vector),
                query_filter=_tenant_filter(tenant, exclude_hash=exclude_hash),
                limit=k,
                with_payload=True,
            ).points
        out = []
        for point in found:
            payload = point.payload or {}
            qhash = payload.get("question_hash")
            if isinstance(qhash, str) and qhash != exclude_hash:
                out.append((qhash, float(point.score)))
        return out

    def has(self, tenant: str, question_hash: str) -> bool:
        with self._op():
            found = self.client.retrieve(self.collection, ids=[point_id(tenant, question_hash)])
        return bool(found)

    def delete_tenant(self, tenant: str) -> None:
        with self._op():
            self.client.delete(
                self.collection,
                points_selector=models.FilterSelector(filter=_tenant_filter(tenant)),
                wait=True,
            )

    def count(self, tenant: str) -> int:
        with self._op():
            result = self.client.count(
                self.collection, count_filter=_tenant_filter(tenant), exact=True
            )
        return int(result.count)

    def close(self) -> None:
        try:
            self.client.close()
        except Exception as exc:  # closing must not mask the shutdown's own errors
            log.warning("bank.index_close_failed error=%s", exc)
