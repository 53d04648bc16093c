"""Rubric-bank retrieval benchmark. Prints figures; asserts nothing.

For each bank size (default 10k and 100k items): synthetic bank items are bulk-written to the
database and their question vectors (random unit vectors, 384 dimensions like MiniLM) to the
vector index; then, per retrieval, the latency p50/p99 of
- `within`: exact-hash lookup (the database only);
- `cross`: embed the query with the real MiniLM, top-2 by inner product, fetch the items;
- `index`: the vector search alone (a precomputed query vector).
Qdrant runs in local mode (a folder, no server), and also against a server when
RUBRICATE_QDRANT_URL is set (or --qdrant-url). The database is a temporary SQLite file
unless --database-url (e.g. postgresql://postgres@127.0.0.1:5432/postgres) is given.

    python benchmarks/bank.py [--sizes 10000,100000] [--queries 200] [--database-url URL]
"""

import argparse
import asyncio
import os
import random
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

from sqlalchemy import Engine, insert

from rubricate.common.cache import MemoryCache
from rubricate.common.embeddings import MINILM_DIM, shared_embedder
from rubricate.core.normalize import question_hash
from rubricate.db.base import utcnow
from rubricate.db.engine import make_engine, unit_of_work
from rubricate.db.migrate import upgrade_to_head
from rubricate.reflections.store.index import BankSettings, encode_vector
from rubricate.reflections.store.models import BankItemRow
from rubricate.reflections.store.schemas import RetrieveRequest
from rubricate.reflections.store.service import build_bank_service

TOPICS = ["orbit", "vaccine", "tax", "bread", "river", "chip", "law", "poem", "storm", "gene"]


def question(i: int) -> str:
    return f"Question {i}: what explains the {TOPICS[i % len(TOPICS)]} case number {i}?"


def unit_vector(rng: random.Random) -> list[float]:
    v = [rng.gauss(0.0, 1.0) for _ in range(MINILM_DIM)]
    norm = sum(x * x for x in v) ** 0.5
    return [x / norm for x in v]


def fill_database(engine: Engine, tenant: str, n: int, *, model: str, rng: random.Random) -> None:
    """n items with stored question vectors (random unit vectors, as if embedded)."""
    now = utcnow()
    batch = []
    for i in range(n):
        batch.append(
            {
                "tenant": tenant,
                "question_hash": question_hash(question(i)),
                "question": question(i),
                "rubrics": {"Critical Requirement": [f"requirement {i}"], "Pitfalls": ["p"]},
                "takeaways": [f"lesson {i}"],
                "reflection": "synthetic",
                "score": 0.5,
                "step": 1,
                "provenance": {"benchmark": True},
                "embedding": encode_vector(unit_vector(rng)),
                "embedding_model": model,
                "created_at": now,
                "updated_at": now,
                "version": 1,
            }
        )
        if len(batch) == 5000 or i == n - 1:
            with unit_of_work(engine, write=True) as session:
                session.execute(insert(BankItemRow), batch)
            batch = []


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def timed(n: int, call: Callable[[int], Awaitable[object]]) -> tuple[float, float]:
    samples = []
    for i in range(n):
        t = time.perf_counter()
        await call(i)
        samples.append((time.perf_counter() - t) * 1000)
    return statistics.median(samples), pct(samples, 0.99)


async def run_size(
    engine: Engine, settings: BankSettings, label: str, n: int, queries: int
) -> None:
    tenant = f"bench-{uuid.uuid4().hex[:8]}"
    rng = random.Random(n)
    bank = build_bank_service(
        engine=engine,
        buffer_cache=MemoryCache(),
        embedder=shared_embedder(),
        settings=settings,
    )
    try:
        embedder = shared_embedder()
        t0 = time.perf_counter()
        await asyncio.to_thread(
            lambda: fill_database(engine, tenant, n, model=embedder.name, rng=rng)
        )
        t1 = time.perf_counter()
        if settings.qdrant_url:  # a server keeps its points: write them
            await bank.reindex(tenant)
        else:  # local mode: the first use loads every stored vector into memory
            await asyncio.to_thread(bank._vectors)
        t2 = time.perf_counter()
        _, index = bank._vectors()
        vectors = [unit_vector(rng) for _ in range(queries)]

        async def within(i: int) -> object:
            q = question(rng.randrange(n))
            return await bank.retrieve(tenant, RetrieveRequest(question=q, mode="within"))

        async def cross(i: int) -> object:
            q = question(rng.randrange(n))
            return await bank.retrieve(tenant, RetrieveRequest(question=q, mode="cross", k=2))

        async def search(i: int) -> object:
            return await asyncio.to_thread(index.search, tenant, vectors[i], k=2, exclude_hash=None)

        await cross(0)  # warm the model and the index
        rows = [
            ("within", await timed(queries, within)),
            ("cross", await timed(queries, cross)),
            ("index", await timed(queries, search)),
        ]
        print(
            f"\n{label}, {n:,} items (database write {t1 - t0:.1f} s, "
            f"index load from stored vectors {t2 - t1:.1f} s), {queries} queries each"
        )
        for name, (p50, p99) in rows:
            print(f"  {name:<7} p50 {p50:8.2f} ms   p99 {p99:8.2f} ms")
        try:
            await asyncio.to_thread(index.delete_tenant, tenant)
        except Exception as exc:  # a benchmark leaves a server as it found it, if it can
            print(f"  (could not clean the index: {exc})")
    finally:
        bank.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--qdrant-url", default=os.environ.get("RUBRICATE_QDRANT_URL"))
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]

    with tempfile.TemporaryDirectory() as tmp:
        url = args.database_url or f"sqlite:///{Path(tmp) / 'bench.db'}"
        upgrade_to_head(url)
        engine = make_engine(url)
        print(f"database: {engine.url.render_as_string(hide_password=True)}")
        modes = [("Qdrant local mode", BankSettings(qdrant_url=None))]
        if args.qdrant_url:
            modes.append(
                (f"Qdrant server {args.qdrant_url}", BankSettings(qdrant_url=args.qdrant_url))
            )
        else:
            print("no Qdrant server (set RUBRICATE_QDRANT_URL to compare one)")
        try:
            for label, settings in modes:
                for n in sizes:
                    await run_size(engine, settings, label, n, args.queries)
        finally:
            engine.dispose()


if __name__ == "__main__":
    asyncio.run(main())
