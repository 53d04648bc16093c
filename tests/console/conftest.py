"""A production-shaped platform for the console: API keys for two tenants, the store and the
miner on PostgreSQL, the fake judge behind both model servers; tenant A has a question with
two stored scorings (one trajectory holds a `<script>`), audited groups and a bank item."""

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from rubricate.common.auth import hash_key, new_key
from rubricate.embedded import SERVICES, EmbeddedPlatform
from rubricate.gateway.settings import GatewaySettings
from rubricate.mining.miner.settings import MinerSettings
from rubricate.store.settings import StoreSettings
from rubricate.testing.fake_judge import FakeJudgeBackend
from rubricate.testing.fake_reflections import fake_reflection_verdict
from tests.support.gateway import fast_llm, trajectory

QUESTION = "Why was the Mars Climate Orbiter lost? <b>units</b>"
SCRIPT = '<script>document.title="owned"</script>'


def reflection(marker: str = "") -> str:
    return (
        "<reflection_rubrics>\n"
        f"Critical Requirement:\n- Name the units mismatch. {marker}\n"
        "Analytical Approach:\n- Check the board's report.\n"
        "Communication & Structure:\n- Cause first.\n"
        "Pitfalls:\n- Blaming one person.\n"
        "</reflection_rubrics>\n"
        "<reflection_takeaways>\n1. Lesson 1 on units.\n2. Lesson 2 on units.\n"
        "</reflection_takeaways>"
    )


@dataclass
class Console:
    gateway: str
    platform: EmbeddedPlatform
    keys: dict[str, str]
    """tenant → API key."""
    tenant_a: str
    tenant_b: str
    api: dict[str, httpx.AsyncClient]
    """tenant → the gateway's public API with that tenant's key."""
    question_id: str = ""
    scoring_ids: list[str] = field(default_factory=list)
    question_hash: str = ""


async def wait_for_trajectories(api: httpx.AsyncClient, scoring_id: str) -> None:
    """The first group of a question is audited in the background; its trajectories are
    kept with the audit record."""
    deadline = time.monotonic() + 60
    while True:
        r = await api.get(f"/v1/audit/groups/{scoring_id}/trajectories")
        if r.status_code == 200 and r.json()["trajectories"]:
            return
        assert time.monotonic() < deadline, f"no trajectories kept for {scoring_id}: {r.text}"
        await asyncio.sleep(0.2)


async def seed(c: Console) -> None:
    api = c.api[c.tenant_a]
    for step, marker in ((1, "[[excellent]]"), (2, "[[poor]]")):
        r = await api.post(
            "/v1/stagewise/score",
            json={
                "question": QUESTION,
                "rollouts": [
                    {"id": "good", "trajectory": trajectory(marker)},
                    {"id": "odd", "trajectory": trajectory(f"[[poor]] {SCRIPT}")},
                ],
                "step": step,
            },
        )
        assert r.status_code == 200, r.text
        body: dict[str, Any] = r.json()
        c.question_id = body["question_id"]
        c.scoring_ids.append(body["scoring_id"])
    r = await api.post(
        "/v1/reflections/score",
        json={
            "question": QUESTION,
            "trajectory": trajectory("[[poor]]"),
            "scoring_id": c.scoring_ids[0],
            "rollout_id": "odd",
            "candidates": [reflection("[[u=9,7]]")],
            "step": 2,
        },
    )
    assert r.status_code == 200, r.text
    c.question_hash = r.json()["question_hash"]
    b = c.api[c.tenant_b]
    r = await b.post(
        "/v1/stagewise/score",
        json={
            "question": "What does tenant B ask?",
            "rollouts": [{"id": "x", "trajectory": trajectory("[[poor]]")}],
            "step": 1,
        },
    )
    assert r.status_code == 200, r.text
    await wait_for_trajectories(api, c.scoring_ids[0])


@pytest.fixture
async def console(
    tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Console]:
    tenant_a, tenant_b = f"a-{uuid.uuid4().hex[:8]}", f"b-{uuid.uuid4().hex[:8]}"
    keys = {tenant_a: new_key(), tenant_b: new_key()}
    monkeypatch.setenv("RUBRICATE_AUTH_MODE", "api_key")
    monkeypatch.setenv(
        "RUBRICATE_AUTH_API_KEYS", ",".join(f"{t}:{hash_key(k)}" for t, k in keys.items())
    )
    monkeypatch.setenv("RUBRICATE_AUTH_INTERNAL_TOKEN", "internal-" + new_key())
    backend = FakeJudgeBackend(handlers={"reflection_verdict": fake_reflection_verdict})
    platform = EmbeddedPlatform(
        data_dir=tmp_path,
        ports=dict.fromkeys(SERVICES, 0),
        llm=fast_llm(),
        backend=backend,
        gateway=GatewaySettings(upstream_retries=0),
        store=StoreSettings(database_url=pg_url, redis_url=None, data_dir=tmp_path),
        miner=MinerSettings(data_dir=tmp_path, database_url=pg_url, eager=True),
    )
    async with platform:
        gateway = platform.urls["gateway"]
        clients = {
            t: httpx.AsyncClient(
                base_url=gateway, timeout=60, headers={"Authorization": f"Bearer {k}"}
            )
            for t, k in keys.items()
        }
        c = Console(
            gateway=gateway,
            platform=platform,
            keys=keys,
            tenant_a=tenant_a,
            tenant_b=tenant_b,
            api=clients,
        )
        try:
            await seed(c)
            yield c
        finally:
            for client in clients.values():
                await client.aclose()
