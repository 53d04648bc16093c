"""The buffer service: `BufferStore` (synchronous units of work on the database) and
`BufferService` (async: cache in front, database work in worker threads).

Every write locks the question first, so concurrent groups of the same question are applied
one after the other and none loses a rubric; each request commits once.
"""

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pydantic import ValidationError
from sqlalchemy import Engine, text

from rubricate.common.cache import Cache
from rubricate.db.base import as_utc, utcnow
from rubricate.db.engine import unit_of_work
from rubricate.stagewise.domain.buffer import select_prunes
from rubricate.stagewise.store.models import QuestionRow, RubricRow
from rubricate.stagewise.store.repository import BufferRepository
from rubricate.stagewise.store.schemas import PruneResponse, StoreStats
from rubricate_client.constants import ACTIVE_CAPS, STAGES
from rubricate_client.schemas.buffers import BufferView
from rubricate_client.schemas.rubrics import Rubric, Stage

log = logging.getLogger("rubricate.store")


class BufferNotFoundError(LookupError):
    def __init__(self, tenant: str, question_id: str) -> None:
        super().__init__(f"no rubric buffer for question {question_id!r}")
        self.tenant = tenant
        self.question_id = question_id


@dataclass(frozen=True)
class AddOutcome:
    """What an add changed (for logs and tests)."""

    inserted: list[str]
    reactivated: list[str]
    upgraded: list[str]


def _view(question: QuestionRow, rows: Sequence[RubricRow]) -> BufferView:
    by_stage: dict[Stage, list[Rubric]] = {s: [] for s in STAGES}
    for row in rows:
        rubric = row.to_rubric()
        by_stage[rubric.stage].append(rubric)
    return BufferView(
        question_id=question.question_id,
        question=question.question,
        version=question.version,
        updated_at=as_utc(question.updated_at),
        rubrics=by_stage,
    )


def _merge_duplicates(rubrics: Sequence[Rubric]) -> dict[str, Rubric]:
    """First occurrence of each id; persistent if any occurrence is."""
    merged: dict[str, Rubric] = {}
    for rubric in rubrics:
        prev = merged.get(rubric.id)
        if prev is None:
            merged[rubric.id] = rubric
        elif rubric.origin == "persistent" and prev.origin != "persistent":
            merged[rubric.id] = prev.model_copy(update={"origin": "persistent"})
    return merged


class BufferStore:
    """The rubric buffers in the database. Synchronous; each method is one transaction."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def get(self, tenant: str, question_id: str) -> BufferView | None:
        """The buffer (rubrics not pruned, by stage, in insertion order), or None."""
        with unit_of_work(self.engine, write=False) as session:
            repo = BufferRepository(session)
            question = repo.question(tenant, question_id)
            if question is None:
                return None
            return _view(question, repo.live_rubrics(tenant, question_id))

    def add(
        self,
        tenant: str,
        question_id: str,
        *,
        question: str,
        rubrics: Sequence[Rubric],
        step: int | None = None,
    ) -> BufferView:
        """Add rubrics, creating the buffer if needed.

        New ids are inserted; a rubric already in the buffer is left as it is, except that a
        persistent copy of an active rubric makes it persistent; a pruned one is re-activated
        (new insertion order, variance reset: it must be measured again before pruning).
        """
        view, _ = self.add_detailed(
            tenant, question_id, question=question, rubrics=rubrics, step=step
        )
        return view

    def add_detailed(
        self,
        tenant: str,
        question_id: str,
        *,
        question: str,
        rubrics: Sequence[Rubric],
        step: int | None = None,
    ) -> tuple[BufferView, AddOutcome]:
        """`add`, also saying which ids were inserted, re-activated and made persistent."""
        now = utcnow()
        incoming = _merge_duplicates(rubrics)
        outcome = AddOutcome(inserted=[], reactivated=[], upgraded=[])
        with unit_of_work(self.engine, write=True) as session:
            repo = BufferRepository(session)
            repo.ensure_question(tenant, question_id, question=question, now=now)
            row = repo.lock_question(tenant, question_id)
            if row is None:  # pragma: no cover - ensured just above, in this transaction
                raise BufferNotFoundError(tenant, question_id)
            stored = repo.rubrics_by_id(tenant, question_id, incoming)
            seq: int | None = None
            new_rows: list[RubricRow] = []
            for rid, rubric in incoming.items():
                existing = stored.get(rid)
                created_step = rubric.created_step if rubric.created_step is not None else step
                if existing is not None and existing.pruned_at is None:
                    if rubric.origin == "persistent" and existing.origin != "persistent":
                        existing.origin = "persistent"
                        outcome.upgraded.append(rid)
                    continue
                if seq is None:
                    seq = repo.next_seq(tenant, question_id)
                if existing is None:
                    new_rows.append(
                        RubricRow(
                            tenant=tenant,
                            question_id=question_id,
                            id=rid,
                            stage=rubric.stage,
                            origin=rubric.origin,
                            title=rubric.title,
                            description=rubric.description,
                            weight=rubric.weight,
                            polarity=rubric.polarity,
                            created_step=created_step,
                            variance=None,
                            seq=seq,
                            created_at=now,
                        )
                    )
                    outcome.inserted.append(rid)
                else:
                    existing.origin = rubric.origin
                    existing.title = rubric.title
                    existing.description = rubric.description
                    existing.weight = rubric.weight
                    existing.created_step = created_step
                    existing.variance = None
                    existing.seq = seq
                    existing.pruned_at = None
                    existing.pruned_step = None
                    outcome.reactivated.append(rid)
                seq += 1
            repo.add_rubrics(new_rows)
            if row.version == 0 or outcome.inserted or outcome.reactivated or outcome.upgraded:
                row.version += 1
                row.updated_at = now
            repo.flush()
            view = _view(row, repo.live_rubrics(tenant, question_id))
        if outcome.inserted or outcome.reactivated or outcome.upgraded:
            log.info(
                "store.added tenant=%s question_id=%s inserted=%d reactivated=%d upgraded=%d "
                "version=%d",
                tenant,
                question_id,
                len(outcome.inserted),
                len(outcome.reactivated),
                len(outcome.upgraded),
                view.version,
            )
        return view, outcome

    def prune(
        self,
        tenant: str,
        question_id: str,
        *,
        variances: Mapping[str, float],
        caps: Mapping[Stage, int] = ACTIVE_CAPS,
        step: int | None = None,
    ) -> PruneResponse:
        """Record the group's variances, then prune each stage's actives over its cap
        (lowest variance first, ties against the older; unmeasured rubrics are kept).

        Ids in `variances` that are not in the buffer are reported as `ignored`.
        Raises BufferNotFoundError when the question has no buffer.
        """
        now = utcnow()
        full_caps: dict[Stage, int] = {**ACTIVE_CAPS, **caps}
        with unit_of_work(self.engine, write=True) as session:
            repo = BufferRepository(session)
            row = repo.lock_question(tenant, question_id)
            if row is None:
                raise BufferNotFoundError(tenant, question_id)
            live = repo.live_rubrics(tenant, question_id)
            by_id = {r.id: r for r in live}
            ignored: list[str] = []
            measured = False
            for rid, value in variances.items():
                target = by_id.get(rid)
                if target is None:
                    ignored.append(rid)
                    continue
                target.variance = float(value)
                measured = True
            pruned = select_prunes([r.to_rubric() for r in live], caps=full_caps)
            for rid in pruned:
                by_id[rid].pruned_at = now
                by_id[rid].pruned_step = step
            if measured or pruned:
                row.version += 1
                row.updated_at = now
            repo.flush()
            gone = set(pruned)
            view = _view(row, [r for r in live if r.id not in gone])
        if pruned:
            log.info("store.pruned tenant=%s question_id=%s ids=%s", tenant, question_id, pruned)
        return PruneResponse(pruned=pruned, ignored=ignored, buffer=view)

    def stats(self) -> StoreStats:
        with unit_of_work(self.engine, write=False) as session:
            repo = BufferRepository(session)
            return StoreStats(
                questions=repo.count_questions(),
                rubrics=repo.count_rubrics(pruned=False),
                pruned_rubrics=repo.count_rubrics(pruned=True),
            )

    def ping(self) -> None:
        with self.engine.connect() as conn:
            conn.execute(text("SELECT 1"))


def cache_key(tenant: str, question_id: str) -> str:
    # Tenants cannot contain ':', so the key is unambiguous. `v1`: the BufferView layout.
    return f"rubricate:store:buffer:v1:{tenant}:{question_id}"


class BufferService:
    """Async facade used by the routes: cached reads, writes that publish the new buffer.

    After each committed write the new buffer is published to the cache, versioned: an
    older buffer read concurrently from the database can never replace it.
    """

    def __init__(self, store: BufferStore, cache: Cache, *, ttl_s: float = 300.0) -> None:
        self.store = store
        self.cache = cache
        self.ttl_s = ttl_s

    async def get(self, tenant: str, question_id: str) -> BufferView | None:
        key = cache_key(tenant, question_id)
        raw = await self.cache.get(key)
        if raw is not None:
            try:
                return BufferView.model_validate_json(raw)
            except ValidationError:
                log.warning("store.cache_entry_invalid key=%s", key)
                await self.cache.delete(key)
        view = await asyncio.to_thread(self.store.get, tenant, question_id)
        if view is not None:
            await self._publish(tenant, view)
        return view

    async def add(
        self,
        tenant: str,
        question_id: str,
        *,
        question: str,
        rubrics: Sequence[Rubric],
        step: int | None = None,
    ) -> BufferView:
        view = await asyncio.to_thread(
            lambda: self.store.add(
                tenant, question_id, question=question, rubrics=rubrics, step=step
            )
        )
        await self._publish(tenant, view)
        return view

    async def prune(
        self,
        tenant: str,
        question_id: str,
        *,
        variances: Mapping[str, float],
        caps: Mapping[Stage, int] = ACTIVE_CAPS,
        step: int | None = None,
    ) -> PruneResponse:
        result = await asyncio.to_thread(
            lambda: self.store.prune(tenant, question_id, variances=variances, caps=caps, step=step)
        )
        await self._publish(tenant, result.buffer)
        return result

    async def stats(self) -> StoreStats:
        return await asyncio.to_thread(self.store.stats)

    async def _publish(self, tenant: str, view: BufferView) -> None:
        await self.cache.set(
            cache_key(tenant, view.question_id),
            view.model_dump_json(),
            ttl_s=self.ttl_s,
            version=view.version,
        )
