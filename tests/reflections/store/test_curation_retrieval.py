"""Curation and retrieval: PostgreSQL, Qdrant in local mode, the real MiniLM. A retired item
is never retrieved (also while the index still holds its point); with approval required,
only approved items are."""

from collections.abc import Iterator

import pytest
from sqlalchemy import Engine

from rubricate.common.cache import MemoryCache
from rubricate.common.embeddings import Embedder, shared_embedder
from rubricate.core.normalize import question_hash
from rubricate.reflections.store.index import BankSettings
from rubricate.reflections.store.schemas import BankCurationIn, BankItemIn, RetrieveRequest
from rubricate.reflections.store.service import BankService, build_bank_service

QUESTIONS = [
    "Why was the Mars Climate Orbiter lost in 1999?",
    "What caused the failure of the Mars Polar Lander mission?",
    "Why did the Mars Observer spacecraft fall silent in 1993?",
    "How do sourdough starters leaven bread?",
    "What are the tax rules for capital gains on shares in Germany?",
]
ORBITER, LANDER, OBSERVER = QUESTIONS[:3]


@pytest.fixture(scope="module")
def minilm() -> Embedder:
    return shared_embedder()


def service(engine: Engine, embedder: Embedder, *, require_approval: bool = False) -> BankService:
    return build_bank_service(
        engine=engine,
        buffer_cache=MemoryCache(),
        embedder=embedder,
        settings=BankSettings(bank_require_approval=require_approval),
    )


@pytest.fixture
def bank(pg_engine: Engine, minilm: Embedder) -> Iterator[BankService]:
    svc = service(pg_engine, minilm)
    yield svc
    svc.close()


def item(question: str, *, step: int = 1) -> BankItemIn:
    return BankItemIn(
        question=question,
        rubrics={"Critical Requirement": [f"about: {question}"]},
        takeaways=[f"lesson for {question}"],
        reflection="text",
        score=0.5,
        step=step,
    )


async def fill(bank: BankService, tenant: str) -> None:
    for q in QUESTIONS:
        out = await bank.offer(tenant, item(q))
        assert out.written and out.indexed


async def curate(bank: BankService, tenant: str, question: str, action: str) -> None:
    await bank.curate(
        tenant, question_hash(question), BankCurationIn(action=action, author="key:test")
    )


async def within(bank: BankService, tenant: str, question: str) -> list[str]:
    found = await bank.retrieve(tenant, RetrieveRequest(question=question, mode="within"))
    return [i.question for i in found.items]


async def cross(bank: BankService, tenant: str, question: str, k: int = 2) -> list[str]:
    found = await bank.retrieve(tenant, RetrieveRequest(question=question, mode="cross", k=k))
    return [i.question for i in found.items]


async def test_a_retired_item_is_never_retrieved(bank: BankService, tenant: str) -> None:
    await fill(bank, tenant)
    assert await within(bank, tenant, LANDER) == [LANDER]
    assert (await cross(bank, tenant, ORBITER))[0] == LANDER
    await curate(bank, tenant, LANDER, "retire")
    assert await within(bank, tenant, LANDER) == []
    found = await cross(bank, tenant, ORBITER, k=10)
    assert LANDER not in found and len(found) == len(QUESTIONS) - 2
    assert found[0] == OBSERVER
    # its point left the index, and a newer reflection does not bring it back
    stats = await bank.stats(tenant)
    assert (stats.items, stats.indexed) == (len(QUESTIONS), len(QUESTIONS) - 1)
    refused = await bank.offer(tenant, item(LANDER, step=7))
    assert not refused.written and not refused.indexed and "retired" in refused.reason
    assert await within(bank, tenant, LANDER) == []
    # a rebuilt index leaves it out too
    assert await bank.reindex(tenant) == len(QUESTIONS) - 1


async def test_a_stale_index_point_of_a_retired_item_is_skipped(
    bank: BankService, tenant: str
) -> None:
    await fill(bank, tenant)
    # retired behind this service's back (another store replica, whose index is its own):
    # this service's index still holds the point
    bank.store.curate(
        tenant, question_hash(LANDER), BankCurationIn(action="retire", author="key:test")
    )
    assert (await bank.stats(tenant)).indexed == len(QUESTIONS)
    found = await cross(bank, tenant, ORBITER, k=2)
    assert LANDER not in found and len(found) == 2 and found[0] == OBSERVER
    assert await within(bank, tenant, LANDER) == []


async def test_with_approval_required_only_approved_items_are_retrieved(
    pg_engine: Engine, minilm: Embedder, tenant: str
) -> None:
    strict = service(pg_engine, minilm, require_approval=True)
    try:
        await fill(strict, tenant)
        assert await within(strict, tenant, LANDER) == []
        assert await cross(strict, tenant, ORBITER) == []
        # the two least similar items approved: the search widens past the pending ones
        sourdough, tax = QUESTIONS[3], QUESTIONS[4]
        await curate(strict, tenant, sourdough, "approve")
        await curate(strict, tenant, tax, "approve")
        assert await within(strict, tenant, sourdough) == [sourdough]
        assert set(await cross(strict, tenant, ORBITER, k=2)) == {sourdough, tax}
        await curate(strict, tenant, LANDER, "approve")
        assert (await cross(strict, tenant, ORBITER, k=2))[0] == LANDER
        # a newer reflection makes it pending again: not retrieved until approved anew
        await strict.offer(tenant, item(LANDER, step=2))
        assert await within(strict, tenant, LANDER) == []
        assert LANDER not in await cross(strict, tenant, ORBITER, k=10)
    finally:
        strict.close()
    # without the setting, pending items are retrieved as before
    lenient = service(pg_engine, minilm)
    try:
        assert await within(lenient, tenant, LANDER) == [LANDER]
    finally:
        lenient.close()


async def test_restore_keeps_retired_items_out_of_the_index(bank: BankService, tenant: str) -> None:
    await fill(bank, tenant)
    await bank.snapshot(tenant, 1, replace=False)
    await curate(bank, tenant, LANDER, "retire")
    restored = await bank.restore(tenant, 1)
    assert restored.indexed
    stats = await bank.stats(tenant)
    assert (stats.items, stats.indexed) == (len(QUESTIONS), len(QUESTIONS) - 1)
    assert await within(bank, tenant, LANDER) == []
    assert LANDER not in await cross(bank, tenant, ORBITER, k=10)
