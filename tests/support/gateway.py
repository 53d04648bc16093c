from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from rubricate.embedded import SERVICES, EmbeddedPlatform
from rubricate.gateway.settings import GatewaySettings
from rubricate.llm.settings import LLMSettings
from rubricate.testing.fake_judge import FakeJudgeBackend


def trajectory(
    marker: str = "",
    *,
    plan: bool = True,
    research: bool = True,
    review: bool = True,
    answer: bool = True,
) -> str:
    parts = []
    if plan:
        parts.append(
            f"<think>scope {marker}</think><structured_plan>plan {marker}</structured_plan>"
        )
    if research:
        parts.append(
            f'\n<call_tool name="search">q {marker}</call_tool><tool_output>o</tool_output>'
        )
    if review:
        parts.append(f"\n<think>audit</think><review>gaps {marker}</review>")
    if answer:
        parts.append(f"\n<answer>final {marker}</answer>")
    return "".join(parts)


@dataclass
class Running:
    platform: EmbeddedPlatform
    backend: FakeJudgeBackend
    client: httpx.AsyncClient


def fast_llm() -> LLMSettings:
    return LLMSettings(max_retries=1, backoff_base_s=0.001, backoff_max_s=0.002)


@pytest.fixture
async def running(tmp_path: Path) -> AsyncIterator[Running]:
    backend = FakeJudgeBackend()
    platform = EmbeddedPlatform(
        data_dir=tmp_path,
        ports=dict.fromkeys(SERVICES, 0),
        llm=fast_llm(),
        backend=backend,
        gateway=GatewaySettings(upstream_retries=0, max_body_bytes=200_000),
    )
    async with platform, httpx.AsyncClient(base_url=platform.urls["gateway"], timeout=30) as c:
        yield Running(platform=platform, backend=backend, client=c)
