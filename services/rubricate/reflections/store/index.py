"""Question embeddings of the bank in Qdrant (RubricEM App. D.5: inner-product top-k).

Qdrant's local mode (in process, no server) by default; a Qdrant server when
`RUBRICATE_QDRANT_URL` is set. The database is the record: each bank item stores its
question's embedding, and the local index lives in memory, rebuilt from those stored vectors
when the store first uses the bank (no re-embedding; local mode's on-disk storage commits one
point at a time, far too slow to restore 100k items, and locks its folder to one process).
Every point carries its tenant and question hash, and no search crosses tenants. The point
id derives from (tenant, question hash), so writing a question twice keeps one point. A
retired item's point is removed; the store also checks every hit against the database, so a
stale point is never returned.
Blocking API: call it from a worker thread in async code.
"""

import contextlib
import logging
import sys
import threading
import uuid
from array import array
from collections.abc import Iterator, Sequence
from typing import Any

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict
from qdrant_client import QdrantClient, models

log = logging.getLogger("rubricate.reflections.store.repository")

_POINT_NS = uuid.UUID("6f1d3c52-2a9e-4f7b-9c1e-52b4a1d0e7aa")


class BankSettings(BaseSettings):
    """Bank settings (env prefix RUBRICATE_).

    Env: RUBRICATE_QDRANT_URL, RUBRICATE_QDRANT_API_KEY, RUBRICATE_BANK_COLLECTION,
    RUBRICATE_BANK_REQUIRE_APPROVAL. (RUBRICATE_SCORING_RETENTION_S: `StoreSettings`.)
    """

    model_config = SettingsConfigDict(env_prefix="RUBRICATE_", extra="ignore")

    qdrant_url: str | None = None
    """A Qdrant server (`http://qdrant:6333`); None: Qdrant's local mode, in memory."""
    qdrant_api_key: str | None = None
    bank_collection: str = Field(default="rubricate_bank", pattern=r"^[A-Za-z0-9_\-]+$")
    bank_require_approval: bool = False
    """Retrieve only items a person approved (otherwise pending ones too; a retired item is
    never retrieved)."""


def encode_vector(vector: Sequence[float]) -> bytes:
    """float32, little-endian."""
    values = array("f", vector)
    if sys.byteorder == "big":  # pragma: no cover - no big-endian CPUs in our fleet
        values.byteswap()
    return values.tobytes()


def decode_vector(blob: bytes) -> list[float]:
    values = array("f")
    values.frombytes(blob)
    if sys.byteorder == "big":  # pragma: no cover
        values.byteswap()
    return values.tolist()


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
    """The vector index of bank questions.

    On a server: one collection, each point tagged with its tenant, every search filtered on
    the tenant (payload indexes make that cheap). In local mode: one collection per tenant
    and no filters, because local mode evaluates a filter in Python point by point, while an
    unfiltered search is one matrix product.
    """

    def __init__(self, client: QdrantClient, *, collection: str, dim: int, server: bool) -> None:
        self.client = client
        self.collection = collection
        self.dim = dim
        self.server = server
        self._ready: set[str] = set()
        self._lock = threading.Lock()
        self._local_lock = threading.Lock()

    @classmethod
    def open(cls, settings: BankSettings, *, dim: int) -> "BankIndex":
        if settings.qdrant_url:
            client = QdrantClient(url=settings.qdrant_url, api_key=settings.qdrant_api_key)
            return cls(client, collection=settings.bank_collection, dim=dim, server=True)
        client = QdrantClient(location=":memory:")
        return cls(client, collection=settings.bank_collection, dim=dim, server=False)

    def collection_for(self, tenant: str) -> str:
        return self.collection if self.server else f"{self.collection}--{tenant}"

    @contextlib.contextmanager
    def _op(self, tenant: str) -> Iterator[str]:
        """The tenant's collection, created if needed; local mode runs one call at a time."""
        name = self.collection_for(tenant)
        self._ensure(name)
        if self.server:
            yield name
            return
        with self._local_lock:
            yield name

    def ensure(self) -> None:
        """Check the index answers (and, on a server, create the shared collection)."""
        if self.server:
            self._ensure(self.collection)
        else:
            with self._local_lock:
                self.client.get_collections()

    def _ensure(self, name: str) -> None:
        if name in self._ready:
            return
        with self._lock, contextlib.ExitStack() as stack:
            if name in self._ready:
                return
            if not self.server:
                stack.enter_context(self._local_lock)
            if not self.client.collection_exists(name):
                self.client.create_collection(
                    name,
                    vectors_config=models.VectorParams(size=self.dim, distance=models.Distance.DOT),
                )
                if self.server:
                    for key in ("tenant", "question_hash"):
                        self.client.create_payload_index(
                            name, field_name=key, field_schema=models.PayloadSchemaType.KEYWORD
                        )
            self._ready.add(name)

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
            with self._op(tenant) as name:
                self.client.upsert(name, points=points, wait=True)

    def search(
        self, tenant: str, vector: Sequence[float], *, k: int, exclude_hash: str | None
    ) -> list[tuple[str, float]]:
        """Top-k (question hash, inner product) of `tenant`, never `exclude_hash`."""
        if self.server:
            query_filter: models.Filter | None = _tenant_filter(tenant, exclude_hash=exclude_hash)
            limit = k
        else:  # a tenant's own collection; the excluded question is at most one point
            query_filter, limit = None, k + (exclude_hash is not None)
        with self._op(tenant) as name:
            found = self.client.query_points(
                name, query=list(vector), query_filter=query_filter, limit=limit, with_payload=True
            ).points
        out = []
        for point in found:
            payload = point.payload or {}
            qhash = payload.get("question_hash")
            if isinstance(qhash, str) and qhash != exclude_hash:
                out.append((qhash, float(point.score)))
        return out[:k]

    def has(self, tenant: str, question_hash: str) -> bool:
        with self._op(tenant) as name:
            found = self.client.retrieve(name, ids=[point_id(tenant, question_hash)])
        return bool(found)

    def delete(self, tenant: str, question_hashes: Sequence[str]) -> None:
        """Remove the points of `question_hashes` of `tenant` (absent ones are no error)."""
        if not question_hashes:
            return
        with self._op(tenant) as name:
            self.client.delete(
                name,
                points_selector=models.PointIdsList(
                    points=[point_id(tenant, h) for h in question_hashes]
                ),
                wait=True,
            )

    def delete_tenant(self, tenant: str) -> None:
        if not self.server:
            name = self.collection_for(tenant)
            with self._lock, self._local_lock:
                self.client.delete_collection(name)
                self._ready.discard(name)
            return
        with self._op(tenant) as name:
            self.client.delete(
                name,
                points_selector=models.FilterSelector(filter=_tenant_filter(tenant)),
                wait=True,
            )

    def count(self, tenant: str) -> int:
        with self._op(tenant) as name:
            result = self.client.count(
                name, count_filter=_tenant_filter(tenant) if self.server else None, exact=True
            )
        return int(result.count)

    def close(self) -> None:
        try:
            self.client.close()
        except Exception as exc:  # closing must not mask the shutdown's own errors
            log.warning("bank.index_close_failed error=%s", exc)
