"""Within- and cross-episode retrieval: PostgreSQL, Qdrant in local mode, the real MiniLM."""

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from rubricate.common.embeddings import Embedder, shared_embedder
from rubricate.core.normalize import question_hash
from rubricate.store.bank_schemas import BankItemIn, RetrieveRequest
from rubricate.store.bank_service import BankService, build_bank_service
from rubricate.store.cache import MemoryCache

QUESTIONS = [
    "Why was the Mars Climate Orbiter lost in 1999?",
    "What caused the failure of the Mars Polar Lander mission?",
    "How do sourdough starters leaven bread?",
    "Which yeast strains are used for baking bread?",
    "What are the tax rules for capital gains on shares in Germany?",
]


@pytest.fixture(scope="module")
def minilm() -> Embedder:
    return shared_embedder()


@pytest.fixture
def bank(pg_engine: Engine, tmp_path: Path, minilm: Embedder) -> Iterator[BankService]:
    service = build_bank_service(
        engine=pg_engine, data_dir=tmp_path, buffer_cache=MemoryCache(), embedder=minilm
    )
    yield service
    service.close()


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


async def test_within_is_the_exact_normalized_question(bank: BankService, tenant: str) -> None:
    await fill(bank, tenant)
    found = await bank.retrieve(
        tenant,
        RetrieveRequest(
            question="  why was the MARS climate orbiter lost in 1999? ", mode="within"
        ),
    )
    assert [i.question for i in found.items] == [QUESTIONS[0]]
    assert found.items[0].similarity is None
    assert found.question_hash == question_hash(QUESTIONS[0])
    none = await bank.retrieve(
        tenant, RetrieveRequest(question="Why was the Mars Climate Orbiter lost?", mode="within")
    )
    assert none.items == []


async def test_cross_returns_similar_questions_never_the_question_itself(
    bank: BankService, tenant: str
) -> None:
    await fill(bank, tenant)
    found = await bank.retrieve(tenant, RetrieveRequest(question=QUESTIONS[0], mode="cross"))
    assert len(found.items) == 2  # k = 2 by default
    assert QUESTIONS[0] not in [i.question for i in found.items]
    assert found.items[0].question == QUESTIONS[1]  # the other Mars mission
    sims = [i.similarity for i in found.items]
    assert all(s is not None for s in sims) and sims == sorted(sims, reverse=True)  # type: ignore[type-var]

    bread = await bank.retrieve(
        tenant, RetrieveRequest(question="How is bread made to rise?", mode="cross", k=2)
    )
    assert {i.question for i in bread.items} == {QUESTIONS[2], QUESTIONS[3]}

    everything = await bank.retrieve(
        tenant, RetrieveRequest(question=QUESTIONS[4], mode="cross", k=50)
    )
    assert len(everything.items) == len(QUESTIONS) - 1
    assert QUESTIONS[4] not in [i.question for i in everything.items]


async def test_retrieval_is_scoped_by_tenant(bank: BankService, tenant: str) -> None:
    await fill(bank, tenant)
    other = f"{tenant}-other"
    await bank.offer(other, item("How do rockets reach orbit?"))
    found = await bank.retrieve(other, RetrieveRequest(question=QUESTIONS[0], mode="cross", k=5))
    assert [i.question for i in found.items] == ["How do rockets reach orbit?"]
    stats = await bank.stats(other)
    assert (stats.items, stats.indexed) == (1, 1)


async def test_replacing_an_item_keeps_one_point_and_restore_reindexes(
    bank: BankService, tenant: str
) -> None:
    await fill(bank, tenant)
    await bank.offer(tenant, item(QUESTIONS[0], step=2))
    assert (await bank.stats(tenant)).indexed == len(QUESTIONS)
    await bank.snapshot(tenant, 1, replace=False)
    await bank.offer(tenant, item("A question added after the snapshot?", step=3))
    assert (await bank.stats(tenant)).indexed == len(QUESTIONS) + 1
    restored = await bank.restore(tenant, 1)
    assert restored.indexed
    stats = await bank.stats(tenant)
    assert (stats.items, stats.indexed) == (len(QUESTIONS), len(QUESTIONS))
