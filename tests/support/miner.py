import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from rubricate.common.tenancy import TENANT_HEADER
from rubricate.embedded import SERVICES, EmbeddedPlatform
from rubricate.gateway.settings import GatewaySettings
from rubricate.llm.settings import LLMSettings
from rubricate.miner.demo_corpus import ensure_demo_corpus, subset
from rubricate.mining.miner.settings import MinerSettings
from rubricate.testing.fake_judge import FakeJudgeBackend
from rubricate.testing.fake_mining import fake_mining_handlers


@pytest.fixture(scope="session")
def python_docs() -> Path:
    """The real demo corpus: Debian's python3.11-doc HTML, fetched once into the cache."""
    try:
        return ensure_demo_corpus()
    except Exception as exc:  # the archive is a package registry: say what is missing
        pytest.fail(f"could not fetch the demo corpus (apt-get download python3.11-doc): {exc}")


@pytest.fixture(scope="session")
def small_corpus(python_docs: Path) -> Path:
    """Three real documentation pages (json, csv, pathlib)."""
    return subset("small")


@dataclass
class Platform:
    platform: EmbeddedPlatform
    backend: FakeJudgeBackend
    client: httpx.AsyncClient
    """The gateway, with this test's own tenant header."""
    tenant: str


def fake_judge(delay_s: float = 0.0) -> FakeJudgeBackend:
    return FakeJudgeBackend(handlers=fake_mining_handlers(), delay_s=delay_s)


@asynccontextmanager
async def embedded(
    data_dir: Path,
    database_url: str,
    tenant: str,
    backend: FakeJudgeBackend,
    **miner: Any,
) -> AsyncIterator[Platform]:
    platform = EmbeddedPlatform(
        data_dir=data_dir,
        ports=dict.fromkeys(SERVICES, 0),
        llm=LLMSettings(max_retries=1, backoff_base_s=0.001, backoff_max_s=0.002),
        backend=backend,
        gateway=GatewaySettings(upstream_retries=0),
        miner=MinerSettings(
            data_dir=data_dir,
            database_url=database_url,
            eager=True,
            heartbeat_s=0.2,
            lease_s=5,
            **miner,
        ),
    )
    async with (
        platform,
        httpx.AsyncClient(
            base_url=platform.urls["gateway"], timeout=60, headers={TENANT_HEADER: tenant}
        ) as client,
    ):
        yield Platform(platform=platform, backend=backend, client=client, tenant=tenant)


@pytest.fixture
async def running(tmp_path: Path, pg_url: str, tenant: str) -> AsyncIterator[Platform]:
    """Every service in process (Celery eager, Qdrant local mode), the miner on PostgreSQL,
    the fake mining judge behind both model servers."""
    async with embedded(tmp_path, pg_url, tenant, fake_judge()) as p:
        yield p


async def wait_for_job(
    client: httpx.AsyncClient, job_id: str, *, timeout_s: float = 300.0
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        response = await client.get(f"/v1/jobs/{job_id}")
        assert response.status_code == 200, response.text
        job: dict[str, Any] = response.json()
        if job["state"] in ("succeeded", "failed", "cancelled"):
            return job
        assert time.monotonic() < deadline, f"job {job_id} still {job['state']}: {job}"
        await asyncio.sleep(0.2)


def html_documents(folder: Path) -> list[dict[str, str]]:
    return [
        {"id": p.relative_to(folder).as_posix(), "content": p.read_text(), "format": "html"}
        for p in sorted(folder.rglob("*.html"))
    ]
