"""The rubric buffers: `BufferStore` (synchronous units of work on the database, which the
routes run in worker threads) and `BufferCache` (the buffers' cached reads, published after
each write).

Every write locks the question first, so concurrent groups of the same question are applied
one after the other and none loses a rubric; each request commits once.
"""

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from pydantic import ValidationError
from sqlalchemy import Engine, text

from rubricate.common.cache import Cache
from rubricate.core.rubrics import rubric_id
from rubricate.db.base import as_utc, utcnow
from rubricate.db.engine import unit_of_work
from rubricate.db.rows import from_row
from rubricate.stagewise.domain.buffer import RubricState, curation_conflict, select_prunes
from rubricate.stagewise.store.models import QuestionRow, RubricCurationRow, RubricRow
from rubricate.stagewise.store.repository import BufferRepository
from rubricate.stagewise.store.schemas import (
    CurateRubricRequest,
    PruneResponse,
    QuestionQuery,
    StoreStats,
)
from rubricate_client.constants import ACTIVE_CAPS, STAGES
from rubricate_client.schemas.buffers import (
    BufferView,
    QuestionList,
    QuestionSummary,
    RubricCurationResult,
)
from rubricate_client.schemas.curation import CurationEvent, CurationList
from rubricate_client.schemas.rubrics import Origin, Rubric, RubricSpec, Stage

log = logging.getLogger("rubricate.store")


class BufferNotFoundError(LookupError):
    def __init__(self, tenant: str, question_id: str) -> None:
        super().__init__(f"no rubric buffer for question {question_id!r}")
        self.tenant = tenant
        self.question_id = question_id


class RubricNotFoundError(LookupError):
    def __init__(self, question_id: str, rubric_id: str) -> None:
        super().__init__(f"no rubric {rubric_id!r} in the buffer of question {question_id!r}")
        self.question_id = question_id
        self.rubric_id = rubric_id


class CurationConflictError(ValueError):
    """The curation does not apply to the rubric as it stands (a 409)."""


@dataclass(frozen=True)
class AddOutcome:
    """What an add changed (for logs and tests)."""

    inserted: list[str]
    reactivated: list[str]
    upgraded: list[str]
    refused: list[str]
    """Retired rubrics proposed again: never re-activated."""

    @property
    def changed(self) -> bool:
        """Whether the buffer changed (a rubric inserted, re-activated or made persistent)."""
        return bool(self.inserted or self.reactivated or self.upgraded)


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


def _event(row: RubricCurationRow) -> CurationEvent:
    return from_row(
        CurationEvent, row, target="rubric", subject=row.rubric_id, detail=dict(row.detail or {})
    )


def _retire(row: RubricRow, *, author: str, now: datetime) -> None:
    """Out of the buffer for good: a pruned rubric keeps when and at which step it was
    pruned; a pin ends with it."""
    row.retired_at, row.retired_by = now, author
    if row.pruned_at is None:
        row.pruned_at = now
    row.pinned_at, row.pinned_by = None, None


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


def _new_row(
    tenant: str,
    question_id: str,
    rid: str,
    spec: RubricSpec,
    *,
    stage: Stage,
    origin: Origin,
    created_step: int | None,
    seq: int,
    now: datetime,
    **curation: str | datetime | None,
) -> RubricRow:
    """A new live rubric row with the text, weight and polarity of `spec`, not measured yet;
    `curation`: the pin it keeps and the author of an edit."""
    return RubricRow(
        tenant=tenant,
        question_id=question_id,
        id=rid,
        stage=stage,
        origin=origin,
        title=spec.title,
        description=spec.description,
        weight=spec.weight,
        polarity=spec.polarity,
        created_step=created_step,
        variance=None,
        seq=seq,
        created_at=now,
        **curation,
    )


def _reactivate(row: RubricRow, rubric: Rubric, *, created_step: int | None, seq: int) -> None:
    """A pruned rubric back in the buffer: the proposal's text, a new insertion order, and
    its variance reset (it must be measured again before pruning)."""
    row.origin = rubric.origin
    row.title = rubric.title
    row.description = rubric.description
    row.weight = rubric.weight
    row.created_step = created_step
    row.variance = None
    row.seq = seq
    row.pruned_at = None
    row.pruned_step = None


def _apply_adds(
    repo: BufferRepository,
    tenant: str,
    question_id: str,
    incoming: Mapping[str, Rubric],
    *,
    step: int | None,
    now: datetime,
) -> AddOutcome:
    """Insert new ids, re-activate pruned ones, make an active one persistent when a
    persistent copy comes, refuse retired ones (the question is locked)."""
    outcome = AddOutcome(inserted=[], reactivated=[], upgraded=[], refused=[])
    stored = repo.rubrics_by_id(tenant, question_id, incoming)
    seq: int | None = None
    new_rows: list[RubricRow] = []
    for rid, rubric in incoming.items():
        existing = stored.get(rid)
        if existing is not None and existing.retired_at is not None:
            outcome.refused.append(rid)
            continue
        if existing is not None and existing.pruned_at is None:
            if rubric.origin == "persistent" and existing.origin != "persistent":
                existing.origin = "persistent"
                outcome.upgraded.append(rid)
            continue
        if seq is None:
            seq = repo.next_seq(tenant, question_id)
        created_step = rubric.created_step if rubric.created_step is not None else step
        if existing is None:
            new_rows.append(
                _new_row(
                    tenant,
                    question_id,
                    rid,
                    rubric,
                    stage=rubric.stage,
                    origin=rubric.origin,
                    created_step=created_step,
                    seq=seq,
                    now=now,
                )
            )
            outcome.inserted.append(rid)
        else:
            _reactivate(existing, rubric, created_step=created_step, seq=seq)
            outcome.reactivated.append(rid)
        seq += 1
    repo.add_rubrics(new_rows)
    return outcome


def _curation_target(
    repo: BufferRepository,
    tenant: str,
    question_id: str,
    rid: str,
    request: CurateRubricRequest,
) -> tuple[QuestionRow, RubricRow]:
    """The question (locked) and the rubric a curation applies to. Raises
    BufferNotFoundError, RubricNotFoundError and CurationConflictError."""
    question = repo.lock_question(tenant, question_id)
    if question is None:
        raise BufferNotFoundError(tenant, question_id)
    row = repo.rubric(tenant, question_id, rid)
    if row is None:
        raise RubricNotFoundError(question_id, rid)
    state = RubricState(
        pinned=row.pinned_at is not None,
        pruned=row.pruned_at is not None,
        retired=row.retired_at is not None,
    )
    conflict = curation_conflict(request.action, state)
    if conflict is not None:
        raise CurationConflictError(conflict)
    return question, row


def _apply_curation(
    repo: BufferRepository, row: RubricRow, request: CurateRubricRequest, *, now: datetime
) -> tuple[RubricRow, dict[str, object]]:
    """Pin, unpin, retire or edit `row`: the rubric as it now stands (an edit's new one)
    and the event's detail."""
    author = request.author
    if request.action == "pin":
        row.pinned_at, row.pinned_by = now, author
    elif request.action == "unpin":
        row.pinned_at, row.pinned_by = None, None
    elif request.action == "retire":
        _retire(row, author=author, now=now)
    else:
        return _edit(repo, row, request, now=now)
    return row, {}


def _edit(
    repo: BufferRepository, row: RubricRow, request: CurateRubricRequest, *, now: datetime
) -> tuple[RubricRow, dict[str, object]]:
    """An edit retires `row` and adds the edited rubric under its own id (keeping the pin)."""
    assert request.edit is not None  # the request's validator requires it
    tenant, question_id = row.tenant, row.question_id
    new_id = rubric_id(stage=row.stage, spec=request.edit)
    if repo.rubric(tenant, question_id, new_id) is not None:
        raise CurationConflictError(
            f"cannot edit: the edited rubric's id {new_id!r} is already taken in "
            "this question's buffer (ids derive from the stage, polarity, title and "
            "description, not the weight; a pruned or retired rubric keeps its id)"
        )
    edited = _new_row(
        tenant,
        question_id,
        new_id,
        request.edit,
        stage=row.stage,
        origin=row.origin,
        created_step=None,
        seq=repo.next_seq(tenant, question_id),
        now=now,
        pinned_at=row.pinned_at,
        pinned_by=row.pinned_by,
        created_by=request.author,
    )
    _retire(row, author=request.author, now=now)
    row.replaced_by = new_id
    repo.add_rubrics([edited])
    return edited, {"replaced_by": new_id}


def _record_curation(
    repo: BufferRepository,
    question: QuestionRow,
    row: RubricRow,
    request: CurateRubricRequest,
    *,
    detail: dict[str, object],
    now: datetime,
) -> RubricCurationRow:
    """Append the curation event and bump the buffer's version."""
    event = RubricCurationRow(
        tenant=question.tenant,
        question_id=question.question_id,
        seq=repo.next_curation_seq(question.tenant, question.question_id),
        rubric_id=row.id,
        action=request.action,
        author=request.author,
        reason=request.reason or None,
        at=now,
        detail=detail,
    )
    repo.add_curation(event)
    question.version += 1
    question.updated_at = now
    return event


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
        (new insertion order, variance reset: it must be measured again before pruning); a
        retired one stays retired.
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
        with unit_of_work(self.engine, write=True) as session:
            repo = BufferRepository(session)
            repo.ensure_question(tenant, question_id, question=question, now=now)
            row = repo.lock_question(tenant, question_id)
            if row is None:  # pragma: no cover - ensured just above, in this transaction
                raise BufferNotFoundError(tenant, question_id)
            outcome = _apply_adds(
                repo, tenant, question_id, _merge_duplicates(rubrics), step=step, now=now
            )
            if row.version == 0 or outcome.changed:
                row.version += 1
                row.updated_at = now
            repo.flush()
            view = _view(row, repo.live_rubrics(tenant, question_id))
        if outcome.changed:
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

    def curate(
        self, tenant: str, question_id: str, rid: str, request: CurateRubricRequest
    ) -> tuple[RubricCurationResult, BufferView]:
        """Pin, unpin, retire or edit one rubric; records the event and bumps the version.

        Raises BufferNotFoundError, RubricNotFoundError (404s) and CurationConflictError (409).
        """
        now = utcnow()
        with unit_of_work(self.engine, write=True) as session:
            repo = BufferRepository(session)
            question, row = _curation_target(repo, tenant, question_id, rid, request)
            result_row, detail = _apply_curation(repo, row, request, now=now)
            event = _record_curation(repo, question, row, request, detail=detail, now=now)
            repo.flush()
            view = _view(question, repo.live_rubrics(tenant, question_id))
            result = RubricCurationResult(
                event=_event(event),
                rubric=result_row.to_rubric(),
                buffer_version=question.version,
            )
        log.info(
            "store.curated tenant=%s question_id=%s rubric_id=%s action=%s version=%d",
            tenant,
            question_id,
            rid,
            request.action,
            view.version,
        )
        return result, view

    def curations(self, tenant: str, question_id: str) -> CurationList | None:
        """A question's curation events, newest first; None when it has no buffer."""
        with unit_of_work(self.engine, write=False) as session:
            repo = BufferRepository(session)
            if repo.question(tenant, question_id) is None:
                return None
            return CurationList(events=[_event(r) for r in repo.curations(tenant, question_id)])

    def list_questions(self, tenant: str, query: QuestionQuery) -> QuestionList:
        """One page of the tenant's questions with their rubric counts (three queries: the
        total, the page, the counts of the page's questions)."""
        with unit_of_work(self.engine, write=False) as session:
            repo = BufferRepository(session)
            rows, total = repo.list_questions(
                tenant,
                search=query.search,
                sort=query.sort,
                offset=query.offset,
                limit=query.limit,
            )
            counts = repo.rubric_counts(tenant, [r.question_id for r in rows])
            summaries = []
            for row in rows:
                c = counts[row.question_id]
                summaries.append(
                    QuestionSummary(
                        question_id=row.question_id,
                        question=row.question,
                        created_at=as_utc(row.created_at),
                        updated_at=as_utc(row.updated_at),
                        version=row.version,
                        rubrics=sum(c.per_stage.values()),
                        per_stage=c.per_stage,
                        pinned=c.pinned,
                        retired=c.retired,
                    )
                )
        return QuestionList(
            questions=summaries, total=total, offset=query.offset, limit=query.limit
        )

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


class BufferCache:
    """The buffers' cached reads (`cache_key`), in front of `BufferStore`: the routes read
    here first and fill a miss from the database; after each committed write they publish
    the new buffer, versioned, so an older buffer read concurrently from the database can
    never replace it."""

    def __init__(self, cache: Cache, *, ttl_s: float = 300.0) -> None:
        self.cache = cache
        self.ttl_s = ttl_s

    async def get(self, tenant: str, question_id: str) -> BufferView | None:
        """The cached buffer, or None (not cached, or an unreadable entry, then dropped)."""
        key = cache_key(tenant, question_id)
        raw = await self.cache.get(key)
        if raw is None:
            return None
        try:
            return BufferView.model_validate_json(raw)
        except ValidationError:
            log.warning("store.cache_entry_invalid key=%s", key)
            await self.cache.delete(key)
            return None

    async def publish(self, tenant: str, view: BufferView) -> None:
        await self.cache.set(
            cache_key(tenant, view.question_id),
            view.model_dump_json(),
            ttl_s=self.ttl_s,
            version=view.version,
        )
