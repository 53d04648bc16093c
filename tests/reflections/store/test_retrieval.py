"""Within- and cross-episode retrieval: PostgreSQL, Qdrant in local mode, the real MiniLM."""

from collections.abc import Iterator, Sequence

import pytest
from sqlalchemy import Engine, update

from rubricate.common.cache import MemoryCache
from rubricate.common.embeddings import Embedder, shared_embedder
from rubricate.core.normalize import question_hash
from rubricate.db.engine import unit_of_work
from rubricate.reflections.store.models import BankItemRow
from rubricate.reflections.store.schemas import BankItemIn, RetrieveRequest
from rubricate.reflections.store.service import BankService, build_bank_service

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
def bank(pg_engine: Engine, minilm: Embedder) -> Iterator[BankService]:
    service = build_bank_service(engine=pg_engine, buffer_cache=MemoryCache(), embedder=minilm)
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
    # the same question written differently is still the same question
    variant = await bank.retrieve(
        tenant,
        RetrieveRequest(
            question="  WHY was the Mars climate orbiter\nlost in 1999?", mode="cross", k=50
        ),
    )
    assert QUESTIONS[0] not in [i.question for i in variant.items]


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


class CountingEmbedder(Embedder):
    """The real MiniLM, counting the texts it embeds."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        self.texts: list[str] = []

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.texts.extend(texts)
        return self.inner.embed(texts)


async def test_a_restarted_store_rebuilds_its_index_from_stored_vectors(
    pg_engine: Engine, minilm: Embedder, tenant: str
) -> None:
    first = build_bank_service(engine=pg_engine, buffer_cache=MemoryCache(), embedder=minilm)
    try:
        await fill(first, tenant)
    finally:
        first.close()
    # one item lost its vector (e.g. written while the embedder was down)
    with unit_of_work(pg_engine, write=True) as session:
        session.execute(
            update(BankItemRow)
            .where(
                BankItemRow.tenant == tenant,
                BankItemRow.question_hash == question_hash(QUESTIONS[3]),
            )
            .values(embedding=None, embedding_model=None)
        )
    counting = CountingEmbedder(minilm)
    second = build_bank_service(engine=pg_engine, buffer_cache=MemoryCache(), embedder=counting)
    try:
        found = await second.retrieve(
            tenant, RetrieveRequest(question="How is bread made to rise?", mode="cross")
        )
        assert {i.question for i in found.items} == {QUESTIONS[2], QUESTIONS[3]}
        # only the query and the item without a stored vector were embedded
        assert QUESTIONS[0] not in counting.texts
        assert QUESTIONS[3] in counting.texts
        assert "How is bread made to rise?" in counting.texts
        assert (await second.stats(tenant)).indexed == len(QUESTIONS)
    finally:
        second.close()
