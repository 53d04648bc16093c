"""The bank service: database work and embeddings in worker threads, the vector index beside.

The embedding model and the vector index are opened on first use (the store starts fast and
pays for them only when the bank is used). The database is the record; the vector index is
derived from it and can be rebuilt (`reindex`) at any time.
"""

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator

from prometheus_client import Histogram
from sqlalchemy import Engine

from rubricate.common.cache import Cache
from rubricate.common.embeddings import Embedder, EmbeddingSettings, shared_embedder
from rubricate.core.normalize import question_hash
from rubricate.reflections.domain.bank import retrievable
from rubricate.reflections.store.index import BankIndex, BankSettings, decode_vector, encode_vector
from rubricate.reflections.store.repository import BankStore, Curated, OfferOutcome
from rubricate.reflections.store.schemas import (
    BankCurationIn,
    BankItemIn,
    OfferResponse,
    RetrieveRequest,
    RetrieveResponse,
)
from rubricate.reflections.store.snapshots import SnapshotStore
from rubricate.stagewise.store.service import cache_key
from rubricate_client.schemas.bank import (
    BankItemCurationResult,
    BankItemHistory,
    BankItemList,
    BankItemView,
    BankStats,
    RestoreResponse,
    RetrievedItem,
    SnapshotInfo,
)
from rubricate_client.schemas.curation import BankStatus

log = logging.getLogger("rubricate.reflections.store.repository")

BANK_RETRIEVE_LATENCY = Histogram(
    "rubricate_bank_retrieve_seconds",
    "Bank retrieval latency in the store by mode (within | cross).",
    ["mode"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
)


MAX_SEARCH_LIMIT = 4096
"""The most index hits one cross-episode retrieval reads while it skips items that retrieval
may not return (pending ones when approval is required, a stale retired point)."""


class IndexUnavailableError(RuntimeError):
    """The embedding model or the vector index failed (cross-episode retrieval needs both)."""


def _retrieved(item: BankItemView, similarity: float | None = None) -> RetrievedItem:
    fields = item.model_dump(exclude={"status", "reviewed_by", "reviewed_at"})
    return RetrievedItem(**fields, similarity=similarity)


def _offer_reason(outcome: OfferOutcome, step: int | None) -> str:
    if outcome.written:
        return "written"
    if outcome.result == "retired":
        return "the question's bank item is retired: its reflections are not taken any more"
    return f"kept the item of step {outcome.item.step}, newer than step {step}"


class BankService:
    def __init__(
        self,
        *,
        store: BankStore,
        snapshots: SnapshotStore,
        settings: BankSettings,
        embedder_factory: Callable[[], Embedder],
        buffer_cache: Cache,
    ) -> None:
        self.store = store
        self.snapshots = snapshots
        self.settings = settings
        self._embedder_factory = embedder_factory
        self._embedder: Embedder | None = None
        self._index: BankIndex | None = None
        self._open_lock = threading.Lock()
        self.buffer_cache = buffer_cache

    # --- lazily opened model and index ----------------------------------------------------

    def _vectors(self) -> tuple[Embedder, BankIndex]:
        """The embedder and the index, opened on first use; a local (in-memory) index is
        filled from the vectors stored in the database then."""
        with self._open_lock:
            try:
                if self._embedder is None:
                    self._embedder = self._embedder_factory()
                if self._index is None:
                    index = BankIndex.open(self.settings, dim=self._embedder.dim)
                    index.ensure()
                    if not index.server:
                        started = time.perf_counter()
                        n = self._load(index, self._embedder, tenant=None)
                        log.info(
                            "bank.index_loaded items=%d seconds=%.2f",
                            n,
                            time.perf_counter() - started,
                        )
                    self._index = index
            except IndexUnavailableError:
                raise
            except Exception as exc:
                raise IndexUnavailableError(f"{type(exc).__name__}: {exc}") from exc
            return self._embedder, self._index

    def _load(self, index: BankIndex, embedder: Embedder, *, tenant: str | None) -> int:
        """Put the stored vectors of `tenant` (or of every tenant) into the index; items
        without a vector of the current model are embedded now and their vectors stored."""
        by_tenant: dict[str, list[tuple[str, list[float]]]] = {}
        missing: dict[str, list[tuple[str, str]]] = {}
        for row in self.store.embeddings(tenant):
            vector = (
                decode_vector(row.embedding)
                if row.embedding is not None and row.embedding_model == embedder.name
                else None
            )
            if vector is not None and len(vector) == embedder.dim:
                by_tenant.setdefault(row.tenant, []).append((row.question_hash, vector))
            else:
                missing.setdefault(row.tenant, []).append((row.question_hash, row.question))
        for name, todo in missing.items():
            for start in range(0, len(todo), 256):
                chunk = todo[start : start + 256]
                vectors = embedder.embed([q for _, q in chunk])
                self.store.set_embeddings(
                    name,
                    [(h, encode_vector(v)) for (h, _), v in zip(chunk, vectors, strict=True)],
                    model=embedder.name,
                )
                by_tenant.setdefault(name, []).extend(
                    (h, v) for (h, _), v in zip(chunk, vectors, strict=True)
                )
        for name, pairs in by_tenant.items():
            index.upsert(name, pairs, batch=4096)
        return sum(len(p) for p in by_tenant.values())

    def _embed(self, question: str) -> tuple[list[float], str] | None:
        try:
            embedder, _ = self._vectors()
            return embedder.embed([question])[0], embedder.name
        except Exception as exc:
            log.warning("bank.embed_failed error=%s", exc)
            return None

    def _index_one(self, tenant: str, qhash: str, vector: list[float] | None) -> bool:
        if vector is None:
            return False
        try:
            _, index = self._vectors()
            index.upsert(tenant, [(qhash, vector)])
            return True
        except Exception as exc:
            log.warning(
                "bank.index_failed tenant=%s question_hash=%s error=%s", tenant, qhash[:12], exc
            )
            return False

    def close(self) -> None:
        if self._index is not None:
            self._index.close()
            self._index = None

    # --- items ----------------------------------------------------------------------------

    async def offer(self, tenant: str, item: BankItemIn) -> OfferResponse:
        qhash = question_hash(item.question)
        embedded = await asyncio.to_thread(self._embed, item.question)
        vector, model = embedded if embedded is not None else (None, None)
        outcome = await asyncio.to_thread(
            lambda: self.store.offer(
                tenant,
                qhash,
                item,
                embedding=None if vector is None else encode_vector(vector),
                embedding_model=model,
            )
        )
        indexed = outcome.item.status != "retired" and await asyncio.to_thread(
            self._index_one, tenant, qhash, vector
        )
        if outcome.result == "retired":
            log.info(
                "bank.offer_refused tenant=%s question_hash=%s reason=retired", tenant, qhash[:12]
            )
        return OfferResponse(
            written=outcome.written,
            reason=_offer_reason(outcome, item.step),
            item=outcome.item,
            indexed=indexed,
        )

    async def get(self, tenant: str, qhash: str) -> RetrievedItem | None:
        item = await asyncio.to_thread(self.store.get, tenant, qhash)
        return None if item is None else _retrieved(item)

    def _retrievable(self, item: BankItemView) -> bool:
        return retrievable(item.status, require_approval=self.settings.bank_require_approval)

    async def retrieve(self, tenant: str, request: RetrieveRequest) -> RetrieveResponse:
        """Within: the item of the same normalized question (exact hash). Cross: the top-k
        items of other questions by embedding inner product (App. D.5). Either way only
        items that may be retrieved (`domain.bank.retrievable`): never a retired one."""
        with BANK_RETRIEVE_LATENCY.labels(request.mode).time():
            return await self._retrieve(tenant, request)

    async def _retrieve(self, tenant: str, request: RetrieveRequest) -> RetrieveResponse:
        qhash = question_hash(request.question)
        if request.mode == "within":
            item = await asyncio.to_thread(self.store.get, tenant, qhash)
            ok = item is not None and self._retrievable(item)
            items = [_retrieved(item)] if item is not None and ok else []
            return RetrieveResponse(mode="within", question_hash=qhash, items=items)
        items = await asyncio.to_thread(self._cross, tenant, request.question, qhash, request.k)
        return RetrieveResponse(mode="cross", question_hash=qhash, items=items)

    def _cross(self, tenant: str, question: str, qhash: str, k: int) -> list[RetrievedItem]:
        """The top-k retrievable items: hits are checked against the database (a point whose
        item a restore removed, or that is retired, is skipped), and the search widens until
        k are found or the index has no more."""
        embedder, index = self._vectors()
        try:
            vector = embedder.embed([question])[0]
        except Exception as exc:
            raise IndexUnavailableError(f"{type(exc).__name__}: {exc}") from exc
        limit = k
        while True:
            try:
                hits = index.search(tenant, vector, k=limit, exclude_hash=qhash)
            except Exception as exc:
                raise IndexUnavailableError(f"{type(exc).__name__}: {exc}") from exc
            found = self.store.get_many(tenant, [h for h, _ in hits])
            items = [
                _retrieved(found[h], score)
                for h, score in hits
                if h in found and self._retrievable(found[h])
            ]
            if len(items) >= k or len(hits) < limit or limit >= MAX_SEARCH_LIMIT:
                return items[:k]
            limit = min(MAX_SEARCH_LIMIT, limit * 4)

    async def stats(self, tenant: str) -> BankStats:
        items = await asyncio.to_thread(self.store.count, tenant)
        try:
            _, index = await asyncio.to_thread(self._vectors)
            indexed: int | None = await asyncio.to_thread(index.count, tenant)
        except Exception as exc:
            log.warning("bank.index_count_failed tenant=%s error=%s", tenant, exc)
            indexed = None
        return BankStats(items=items, indexed=indexed)

    async def reindex(self, tenant: str) -> int:
        """Rebuild the tenant's vector index from the database; returns the items indexed."""

        def rebuild() -> int:
            embedder, index = self._vectors()
            try:
                index.delete_tenant(tenant)
                return self._load(index, embedder, tenant=tenant)
            except Exception as exc:
                raise IndexUnavailableError(f"{type(exc).__name__}: {exc}") from exc

        n = await asyncio.to_thread(rebuild)
        log.info("bank.reindexed tenant=%s items=%d", tenant, n)
        return n

    # --- curation -------------------------------------------------------------------------

    async def curate(
        self, tenant: str, qhash: str, request: BankCurationIn
    ) -> BankItemCurationResult:
        """A person's approval, edit or retirement; a retired item's point leaves the index
        (best effort: retrieval checks every hit against the database anyway)."""
        curated: Curated = await asyncio.to_thread(self.store.curate, tenant, qhash, request)
        if request.action == "retire":
            await asyncio.to_thread(self._unindex, tenant, qhash)
        return BankItemCurationResult(event=curated.event, item=curated.item)

    def _unindex(self, tenant: str, qhash: str) -> None:
        try:
            _, index = self._vectors()
            index.delete(tenant, [qhash])
        except Exception as exc:
            log.warning(
                "bank.unindex_failed tenant=%s question_hash=%s error=%s", tenant, qhash[:12], exc
            )

    async def history(self, tenant: str, qhash: str) -> BankItemHistory | None:
        return await asyncio.to_thread(self.store.history, tenant, qhash)

    async def list_items(
        self,
        tenant: str,
        *,
        status: BankStatus | None,
        search: str | None,
        offset: int,
        limit: int,
    ) -> BankItemList:
        return await asyncio.to_thread(
            lambda: self.store.list_items(
                tenant, status=status, search=search, offset=offset, limit=limit
            )
        )

    # --- snapshots ------------------------------------------------------------------------

    async def snapshot(self, tenant: str, step: int, *, replace: bool) -> SnapshotInfo:
        return await asyncio.to_thread(lambda: self.snapshots.create(tenant, step, replace=replace))

    async def list_snapshots(self, tenant: str) -> list[SnapshotInfo]:
        return await asyncio.to_thread(self.snapshots.list, tenant)

    async def restore(self, tenant: str, step: int) -> RestoreResponse:
        restored = await asyncio.to_thread(self.snapshots.restore, tenant, step)
        for qid in restored.question_ids:
            await self.buffer_cache.delete(cache_key(tenant, qid))
        try:
            await self.reindex(tenant)
            indexed = True
        except IndexUnavailableError as exc:
            log.warning("bank.restore_index_failed tenant=%s error=%s", tenant, exc)
            indexed = False
        return RestoreResponse(**restored.info.model_dump(), indexed=indexed)

    async def export_lines(self, tenant: str, step: int) -> Iterator[str]:
        return await asyncio.to_thread(self.snapshots.export_lines, tenant, step)

    async def import_lines(
        self, tenant: str, lines: Iterable[str], *, replace: bool
    ) -> SnapshotInfo:
        return await asyncio.to_thread(
            lambda: self.snapshots.import_lines(tenant, lines, replace=replace)
        )


def build_bank_service(
    *,
    engine: Engine,
    buffer_cache: Cache,
    embedder: Embedder | None = None,
    settings: BankSettings | None = None,
) -> BankService:
    """The bank service of a store app; `embedder` defaults to the shared MiniLM model
    (`RUBRICATE_EMBEDDING_*`), loaded on first use."""
    cfg = settings or BankSettings()

    def load() -> Embedder:
        if embedder is not None:
            return embedder
        emb = EmbeddingSettings()
        return shared_embedder(emb.model, emb.device)

    return BankService(
        store=BankStore(engine),
        snapshots=SnapshotStore(engine),
        settings=cfg,
        embedder_factory=load,
        buffer_cache=buffer_cache,
    )
