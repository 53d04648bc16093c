"""Buffer and bank sizes recounted from the database (PostgreSQL and SQLite) into gauges."""

import asyncio
import contextlib
import logging
import uuid
from pathlib import Path

import pytest
from prometheus_client import REGISTRY
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from rubricate.db.engine import make_engine
from rubricate.reflections.store.models import BankItemRow
from rubricate.stagewise.store.service import BufferStore
from rubricate.store.size_metrics import StoreSizes, count_sizes, publish, refresh_forever
from tests.support.rubrics import rubric


def _gauge(name: str, **labels: str) -> float | None:
    return REGISTRY.get_sample_value(name, labels)


def _add_bank_item(engine: Engine, tenant: str) -> None:
    with Session(engine) as session:
        session.add(
            BankItemRow(
                tenant=tenant,
                question_hash=uuid.uuid4().hex * 2,
                question="q",
                rubrics={},
                takeaways=[],
                reflection="r",
                score=0.5,
                step=1,
                provenance={},
            )
        )
        session.commit()


def test_counts_live_rubrics_questions_and_bank_items(
    engine: Engine, store: BufferStore, tenant: str
) -> None:
    before = count_sizes(engine)
    store.add(
        tenant,
        "q1",
        question="Why?",
        rubrics=[
            rubric("plans", stage="plan"),
            rubric("answers", stage="answer", origin="persistent"),
            rubric("cites", stage="answer"),
            rubric("checks", stage="answer"),
        ],
    )
    store.add(tenant, "q2", question="How?", rubrics=[rubric("plans too", stage="plan")])
    _add_bank_item(engine, tenant)
    # cap 1 active answer rubric: the lower-variance one is pruned and no longer counted
    view = store.get(tenant, "q1")
    assert view is not None
    actives = [r.id for r in view.rubrics["answer"] if r.origin == "active"]
    store.prune(tenant, "q1", variances={actives[0]: 0.1, actives[1]: 0.9}, caps={"answer": 1})
    after = count_sizes(engine)

    def delta(stage: str, origin: str) -> int:
        return after.rubrics.get((stage, origin), 0) - before.rubrics.get((stage, origin), 0)

    assert after.questions - before.questions == 2
    assert after.bank_items - before.bank_items == 1
    assert delta("plan", "active") == 2
    assert delta("answer", "persistent") == 1
    assert delta("answer", "active") == 1


def test_publish_sets_gauges_and_zeroes_vanished_pairs() -> None:
    publish(StoreSizes(questions=3, bank_items=2, rubrics={("review", "active"): 4}))
    assert _gauge("rubricate_buffer_questions") == 3
    assert _gauge("rubricate_bank_items") == 2
    assert _gauge("rubricate_buffer_rubrics", stage="review", origin="active") == 4
    publish(StoreSizes(questions=3, bank_items=2, rubrics={("plan", "active"): 1}))
    assert _gauge("rubricate_buffer_rubrics", stage="review", origin="active") == 0
    assert _gauge("rubricate_buffer_rubrics", stage="plan", origin="active") == 1


async def test_refresh_loop_publishes_and_survives_database_errors(
    sqlite_engine: Engine, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = BufferStore(sqlite_engine)
    store.add("t", "q", question="Q", rubrics=[rubric("a"), rubric("b"), rubric("c")])
    task = asyncio.create_task(refresh_forever(sqlite_engine, interval_s=0.01))
    try:
        for _ in range(200):
            if _gauge("rubricate_buffer_rubrics", stage="plan", origin="active") == 3:
                break
            await asyncio.sleep(0.01)
        assert _gauge("rubricate_buffer_rubrics", stage="plan", origin="active") == 3
        assert _gauge("rubricate_buffer_questions") == 1
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    # a database without the tables: a warning, once, and the loop keeps going
    empty = make_engine(f"sqlite:///{tmp_path / 'empty.db'}")
    caplog.set_level(logging.WARNING, logger="rubricate.store.size_metrics")
    failing = asyncio.create_task(refresh_forever(empty, interval_s=0.01))
    await asyncio.sleep(0.1)
    assert not failing.done()
    failing.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await failing
    empty.dispose()
    warnings = [r for r in caplog.records if "store.size_metrics_failed" in r.getMessage()]
    assert len(warnings) == 1
