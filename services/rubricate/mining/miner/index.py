"""Corpus passages in Qdrant: local mode under the data dir by default, a server when
`RUBRICATE_QDRANT_URL` is set. One collection per (tenant, corpus); vectors are the shared
embedder's (all-MiniLM-L6-v2, 384 dims, L2-normalized: cosine = inner product).

Qdrant's local mode locks its folder: one process at a time. Embedded mode runs API and
jobs in one process; with separate Celery workers, use a Qdrant server (or one worker
process that does all the corpus work, as the API never opens the index then).
"""

import hashlib
import threading
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rubricate.common.embeddings import Embedder
from rubricate.mining.domain.search import Hit

_local_clients: dict[Path, Any] = {}
_local_lock = threading.Lock()


def _local_client(path: Path) -> Any:
    from qdrant_client import QdrantClient

    key = path.resolve()
    with _local_lock:
        client = _local_clients.get(key)
        if client is None:
            key.mkdir(parents=True, exist_ok=True)
            client = QdrantClient(path=str(key))
            _local_clients[key] = client
        return client


def close_local_clients() -> None:
    """Release local-mode folders (tests hand a folder from one process to another)."""
    with _local_lock:
        for client in _local_clients.values():
            client.close()
        _local_clients.clear()


@dataclass(frozen=True)
class PassageRecord:
    passage_id: str
    doc_id: str
    position: int
    text: str
    title: str | None = None


def collection_name(tenant: str, corpus: str) -> str:
    digest = hashlib.sha256(f"{tenant}\0{corpus}".encode()).hexdigest()[:24]
    return f"rubricate_corpus_{digest}"


def point_id(tenant: str, corpus: str, passage_id: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"rubricate:{tenant}/{corpus}/{passage_id}"))


class CorpusIndex:
    def __init__(
        self,
        *,
        embedder: Callable[[], Embedder],
        qdrant_url: str | None = None,
        qdrant_path: Path | None = None,
        api_key: str | None = None,
    ) -> None:
        if qdrant_url is None and qdrant_path is None:
            raise ValueError("CorpusIndex needs a Qdrant URL or a local-mode path")
        self._embedder_factory = embedder
        self._url = qdrant_url
        self._path = qdrant_path
        self._api_key = api_key
        self._client: Any = None
        self._lock = threading.Lock()  # local mode is not made for concurrent callers

    @property
    def embedder(self) -> Embedder:
        return self._embedder_factory()

    def _qdrant(self) -> Any:
        if self._client is None:
            if self._url is not None:
                from qdrant_client import QdrantClient

                self._client = QdrantClient(url=self._url, api_key=self._api_key, timeout=30)
            else:
                assert self._path is not None
                self._client = _local_client(self._path)
        return self._client

    def ensure(self, tenant: str, corpus: str) -> int:
        """Create the corpus collection if missing; returns the vector size."""
        from qdrant_client import models

        dim = self.embedder.dim
        name = collection_name(tenant, corpus)
        with self._lock:
            client = self._qdrant()
            if not client.collection_exists(name):
                client.create_collection(
                    collection_name=name,
                    vectors_config=models.VectorParams(size=dim, distance=models.Distance.COSINE),
                )
        return dim

    def upsert(self, tenant: str, corpus: str, passages: Sequence[PassageRecord]) -> int:
        """Embed and store passages (idempotent: ids derive from the passage ids)."""
        from qdrant_client import models

        if not passages:
            return 0
        vectors = self.embedder.embed([p.text for p in passages])
        points = [
            models.PointStruct(
                id=point_id(tenant, corpus, p.passage_id),
                vector=vector,
                payload={
                    "passage_id": p.passage_id,
                    "doc_id": p.doc_id,
                    "position": p.position,
                    "title": p.title,
                    "text": p.text,
                },
            )
            for p, vector in zip(passages, vectors, strict=True)
        ]
        with self._lock:
            self._qdrant().upsert(
                collection_name=collection_name(tenant, corpus), points=points, wait=True
            )
        return len(points)

    def search(
        self, tenant: str, corpus: str, query: str, *, threshold: float, limit: int
    ) -> list[Hit]:
        """Passages with cosine similarity ≥ `threshold`, best first, at most `limit`."""
        [vector] = self.embedder.embed([query])
        with self._lock:
            response = self._qdrant().query_points(
                collection_name=collection_name(tenant, corpus),
                query=vector,
                limit=limit,
                score_threshold=threshold,
                with_payload=True,
            )
        return [
            Hit(passage_id=str(p.payload["passage_id"]), text=str(p.payload["text"]), score=p.score)
            for p in response.points
            if p.payload is not None
        ]

    def count(self, tenant: str, corpus: str) -> int:
        with self._lock:
            client = self._qdrant()
            name = collection_name(tenant, corpus)
            if not client.collection_exists(name):
                return 0
            return int(client.count(collection_name=name, exact=True).count)

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                if self._path is not None:
                    with _local_lock:
                        _local_clients.pop(self._path.resolve(), None)
            self._client = None
