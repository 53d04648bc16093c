"""The stagewise judge with the store on real PostgreSQL and Redis (FakeJudgeBackend model)."""

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from rubricate.embedded import SERVICES, EmbeddedPlatform
from rubricate.store.settings import StoreSettings
from rubricate.testing.fake_judge import FakeJudgeBackend
from tests.support.gateway import fast_llm, trajectory

QUESTION = "Which units did the two navigation programs disagree on?"
CAPS = dict.fromkeys(("plan", "research", "review", "answer"), 50)


@pytest.fixture
async def client(
    tmp_path: Path, pg_url: str, redis_url: str, redis_client: object
) -> AsyncIterator[httpx.AsyncClient]:
    store = StoreSettings(database_url=pg_url, redis_url=redis_url, data_dir=tmp_path)
    platform = EmbeddedPlatform(
        data_dir=tmp_path,
        ports=dict.fromkeys(SERVICES, 0),
        llm=fast_llm(),
        backend=FakeJudgeBackend(),
        store=store,
    )
    async with platform, httpx.AsyncClient(base_url=platform.urls["gateway"], timeout=60) as c:
        yield c


def body(n: int) -> dict[str, object]:
    return {
        "question": QUESTION,
        "question_id": "pg-units",
        "caps": CAPS,
        "rollouts": [
            {"id": "good", "trajectory": trajectory(f"[[excellent]] {n}")},
            {"id": "bad", "trajectory": trajectory(f"[[poor]] {n}")},
        ],
    }


async def test_concurrent_groups_on_postgres_lose_no_rubric(
    client: httpx.AsyncClient, tenant: str
) -> None:
    headers = {"X-Rubricate-Tenant": tenant}
    responses = await asyncio.gather(
        *(client.post("/v1/stagewise/score", json=body(i), headers=headers) for i in range(6))
    )
    assert [r.status_code for r in responses] == [200] * 6, [r.text for r in responses]
    new_ids = {i for r in responses for i in r.json()["generation"]["new_rubric_ids"]}
    assert len(new_ids) == 24  # 6 groups x one new rubric per stage
    buf = await client.get("/v1/buffers/pg-units", headers=headers)
    assert buf.status_code == 200
    out = buf.json()
    stored = {r["id"] for rs in out["rubrics"].values() for r in rs}
    assert new_ids <= stored
    # 6 adds + up to 6 prunes that recorded variances: every write moved the version
    assert out["version"] >= 6


async def test_buffers_are_scoped_by_tenant(client: httpx.AsyncClient, tenant: str) -> None:
    ok = await client.post(
        "/v1/stagewise/score", json=body(0), headers={"X-Rubricate-Tenant": tenant}
    )
    assert ok.status_code == 200
    other = await client.get("/v1/buffers/pg-units", headers={"X-Rubricate-Tenant": tenant + "x"})
    assert other.status_code == 404
    mine = await client.get("/v1/buffers/pg-units", headers={"X-Rubricate-Tenant": tenant})
    assert mine.status_code == 200
