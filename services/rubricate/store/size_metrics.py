"""Buffer and bank sizes as gauges, recounted from the database every few seconds.

Counting in the database (rather than adding and subtracting on each write) keeps the gauges
right with several store replicas, pruning, replacement and restarts; every replica reports
the same totals, so dashboards take `max`. Tenants are summed: a tenant label would be
unbounded.
"""

import asyncio
import logging
from dataclasses import dataclass, field

from sqlalchemy import Engine, func, select
from sqlalchemy.exc import SQLAlchemyError

from rubricate.common.metrics import BANK_ITEMS, BUFFER_QUESTIONS, BUFFER_RUBRICS
from rubricate.reflections.store.models import BankItemRow
from rubricate.stagewise.store.models import QuestionRow, RubricRow

log = logging.getLogger("rubricate.store.size_metrics")

DEFAULT_REFRESH_S = 30.0


@dataclass(frozen=True)
class StoreSizes:
    questions: int
    bank_items: int
    rubrics: dict[tuple[str, str], int] = field(default_factory=dict)
    """Live rubrics per (stage, origin)."""


def count_sizes(engine: Engine) -> StoreSizes:
    with engine.connect() as conn:
        questions = conn.execute(select(func.count()).select_from(QuestionRow)).scalar_one()
        bank_items = conn.execute(select(func.count()).select_from(BankItemRow)).scalar_one()
        rows = conn.execute(
            select(RubricRow.stage, RubricRow.origin, func.count())
            .where(RubricRow.pruned_at.is_(None))
            .group_by(RubricRow.stage, RubricRow.origin)
        ).all()
    return StoreSizes(
        questions=int(questions),
        bank_items=int(bank_items),
        rubrics={(str(stage), str(origin)): int(n) for stage, origin, n in rows},
    )


_seen_rubric_labels: set[tuple[str, str]] = set()


def publish(sizes: StoreSizes) -> None:
    BUFFER_QUESTIONS.set(sizes.questions)
    BANK_ITEMS.set(sizes.bank_items)
    # a (stage, origin) pair that no longer has rubrics drops to 0 rather than vanishing
    for labels in _seen_rubric_labels - set(sizes.rubrics):
        BUFFER_RUBRICS.labels(*labels).set(0)
    for labels, n in sizes.rubrics.items():
        BUFFER_RUBRICS.labels(*labels).set(n)
        _seen_rubric_labels.add(labels)


async def refresh_forever(engine: Engine, *, interval_s: float = DEFAULT_REFRESH_S) -> None:
    """Recount and publish every `interval_s` until cancelled; database errors are logged."""
    failing = False
    while True:
        try:
            publish(await asyncio.to_thread(count_sizes, engine))
            if failing:
                log.info("store.size_metrics_recovered")
            failing = False
        except SQLAlchemyError as exc:
            if not failing:
                log.warning("store.size_metrics_failed error=%s: %s", type(exc).__name__, exc)
            failing = True
        await asyncio.sleep(interval_s)
