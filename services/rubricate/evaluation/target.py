"""How the eval harnesses reach the platform: a running gateway, or an embedded platform
started for the run; and one scoring POST, its failure and its usage read the same way for
every harness (a failed request is an error, never a score)."""

import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

if TYPE_CHECKING:
    from rubricate.llm.settings import LLMSettings


@asynccontextmanager
async def gateway_client(
    url: str | None, llm: "LLMSettings | None", *, timeout_s: float
) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the gateway at `url`, or of an embedded platform on `llm` (temporary data
    directory, free ports) that lives as long as the client."""
    if url:
        async with httpx.AsyncClient(base_url=url, timeout=timeout_s) as client:
            yield client
        return
    if llm is None:
        raise ValueError("an embedded platform needs LLM settings (or pass a gateway URL)")
    from rubricate.embedded import SERVICES, EmbeddedPlatform

    with tempfile.TemporaryDirectory() as tmp:
        platform = EmbeddedPlatform(data_dir=Path(tmp), ports=dict.fromkeys(SERVICES, 0), llm=llm)
        async with (
            platform,
            httpx.AsyncClient(base_url=platform.urls["gateway"], timeout=timeout_s) as client,
        ):
            yield client


@dataclass(frozen=True)
class Posted:
    data: Any
    """The decoded response body ({} when none could be read)."""
    error: str | None
    """Why the request failed (transport, undecodable body, non-200 status), or None."""
    seconds: float
    tokens: int
    """Prompt + completion tokens the request reports spending, failed or not."""
    calls: int


async def post(client: httpx.AsyncClient, path: str, body: dict[str, Any]) -> Posted:
    started = time.perf_counter()
    error: str | None = None
    try:
        response = await client.post(path, json=body)
        data = response.json()
    except (httpx.HTTPError, ValueError) as exc:
        error = f"{type(exc).__name__}: {exc}"
        data = {}
    else:
        if response.status_code != 200:
            detail = data.get("error", {}) if isinstance(data, dict) else {}
            error = f"HTTP {response.status_code}: {detail.get('message', '')}"
    seconds = time.perf_counter() - started
    usage = data.get("usage") or (data.get("error") or {}).get("usage") or {}
    return Posted(
        data=data,
        error=error,
        seconds=seconds,
        tokens=int(usage.get("prompt_tokens", 0)) + int(usage.get("completion_tokens", 0)),
        calls=int(usage.get("calls", 0)),
    )
