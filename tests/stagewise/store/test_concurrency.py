"""Concurrent writers to one question lose nothing (PostgreSQL row lock, SQLite BEGIN
IMMEDIATE)."""

import threading
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import TypeVar

from sqlalchemy import select

from rubricate.db.engine import unit_of_work
from rubricate.stagewise.store.models import RubricRow
from rubricate.stagewise.store.schemas import PruneResponse
from rubricate.stagewise.store.service import BufferStore
from tests.support.rubrics import ids, rubric

T = TypeVar("T")
WRITERS = 8


def _together(calls: Sequence[Callable[[], T]]) -> list[T]:
    """Run the calls in threads released at the same instant."""
    barrier = threading.Barrier(len(calls))

    def run(call: Callable[[], T]) -> T:
        barrier.wait()
        return call()

    with ThreadPoolExecutor(len(calls)) as pool:
        return list(pool.map(run, calls))


def test_concurrent_adds_lose_no_rubric(store: BufferStore, tenant: str) -> None:
    qid = f"q-{uuid.uuid4().hex[:12]}"
    per_writer = [
        [rubric(f"w{w} r{i}", stage=stage) for i, stage in enumerate(("plan", "review", "answer"))]
        for w in range(WRITERS)
    ]
    _together([partial(store.add, tenant, qid, question="q", rubrics=rs) for rs in per_writer])
    view = store.get(tenant, qid)
    assert view is not None
    assert sorted(ids(view)) == sorted(r.id for rs in per_writer for r in rs)
    assert view.version == WRITERS
    with unit_of_work(store.engine, write=False) as session:
        seqs = session.scalars(
            select(RubricRow.seq).where(RubricRow.tenant == tenant, RubricRow.question_id == qid)
        ).all()
    assert sorted(seqs) == list(range(1, 3 * WRITERS + 1))  # every insertion got its own slot


def test_concurrent_prune_and_add_keep_the_added_rubric(store: BufferStore, tenant: str) -> None:
    for round_ in range(6):
        qid = f"q-{uuid.uuid4().hex[:12]}"
        base = [rubric(f"r{round_} {t}") for t in "abc"]  # plan cap is 3: full
        store.add(tenant, qid, question="q", rubrics=base)
        new = rubric(f"r{round_} new")
        variances = {r.id: 0.1 * (i + 1) for i, r in enumerate(base)}
        add = partial(store.add, tenant, qid, question="q", rubrics=[new])
        prune = partial(store.prune, tenant, qid, variances=variances)
        pruned = _together([add, prune])[1]
        assert isinstance(pruned, PruneResponse)
        view = store.get(tenant, qid)
        assert view is not None
        assert new.id in ids(view, "plan")
        # Add first: four actives, the new one unmeasured, so the lowest measured goes.
        # Prune first: within the cap, nothing goes.
        assert pruned.pruned in ([], [base[0].id])
        assert len(view.rubrics["plan"]) == 4 - len(pruned.pruned)
        assert view.version == 3
