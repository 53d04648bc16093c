"""The running platform of the reflection and bank API tests: every service for real (store
on PostgreSQL + Redis, Qdrant local mode, the real MiniLM embedder), FakeJudgeBackend as the
model. The fake's reflection verdicts come from markers in the candidate text (`[[u=7]]`:
every dimension 7/10; `[[judge-fail]]`: the judge call fails)."""

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from rubricate.embedded import SERVICES, EmbeddedPlatform
from rubricate.gateway.settings import GatewaySettings
from rubricate.store.settings import StoreSettings
from rubricate.testing.fake_judge import FakeJudgeBackend
from rubricate.testing.fake_reflections import fake_reflection_verdict
from tests.support.gateway import fast_llm, trajectory

QUESTION = "Why was the Mars Climate Orbiter lost?"


def reflection(marker: str = "", *, lessons: int = 2, topic: str = "units") -> str:
    takeaways = "\n".join(f"{i}. Lesson {i} on {topic}." for i in range(1, lessons + 1))
    return (
        "<reflection_rubrics>\n"
        f"Critical Requirement:\n- Name the {topic} mismatch. {marker}\n"
        "Analytical Approach:\n- Check the board's report.\n"
        "Communication & Structure:\n- Cause first.\n"
        "Pitfalls:\n- Blaming one person.\n"
        "</reflection_rubrics>\n"
        f"<reflection_takeaways>\n{takeaways}\n</reflection_takeaways>"
    )


@dataclass
class Stack:
    client: httpx.AsyncClient
    backend: FakeJudgeBackend
    headers: dict[str, str]


@pytest.fixture
async def stack(
    tmp_path: Path, pg_url: str, redis_url: str, redis_client: object, tenant: str
) -> AsyncIterator[Stack]:
    backend = FakeJudgeBackend(handlers={"reflection_verdict": fake_reflection_verdict})
    platform = EmbeddedPlatform(
        data_dir=tmp_path,
        ports=dict.fromkeys(SERVICES, 0),
        llm=fast_llm(),
        backend=backend,
        gateway=GatewaySettings(upstream_retries=0),
        store=StoreSettings(database_url=pg_url, redis_url=redis_url, data_dir=tmp_path),
    )
    async with platform, httpx.AsyncClient(base_url=platform.urls["gateway"], timeout=120) as c:
        yield Stack(client=c, backend=backend, headers={"X-Rubricate-Tenant": tenant})


async def scored_group(stack: Stack, question: str = QUESTION) -> dict[str, Any]:
    response = await stack.client.post(
        "/v1/stagewise/score",
        json={
            "question": question,
            "rollouts": [
                {"id": "good", "trajectory": trajectory("[[excellent]]")},
                {"id": "bad", "trajectory": trajectory("[[poor]]")},
            ],
            "step": 4,
        },
        headers=stack.headers,
    )
    assert response.status_code == 200, response.text
    out: dict[str, Any] = response.json()
    return out
