"""How the eval harnesses reach the platform: a running gateway, or an embedded platform
started for the run; and one scoring POST to a public route, its failure and its usage read
the same way for every harness (a failed request is an error, never a score), kept on the
harness's run record (`PostedRun`); `post_all` sends a harness's requests a few at a time."""

import asyncio
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import httpx

from rubricate_client.endpoints import Endpoint

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


async def post(
    client: httpx.AsyncClient, endpoint: Endpoint[Any, Any], body: dict[str, Any]
) -> Posted:
    """POST `body` to the public route `endpoint` (one without path parameters)."""
    started = time.perf_counter()
    error: str | None = None
    try:
        response = await client.post(endpoint.path, json=body)
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


@dataclass(kw_only=True)
class PostedRun:
    """A harness's record of one request: why it failed, how long it took, what it cost."""

    error: str | None = None
    seconds: float = 0.0
    tokens: int = 0
    calls: int = 0

    def took(self, posted: Posted) -> None:
        """Keep the request's failure, time and usage."""
        self.error, self.seconds = posted.error, posted.seconds
        self.tokens, self.calls = posted.tokens, posted.calls

    def progress_line(self, done: int, total: int, what: str) -> str:
        """`[done/total] what 1.2 s ok` (or `FAILED (why)`)."""
        status = "ok" if self.error is None else f"FAILED ({self.error[:80]})"
        return f"[{done}/{total}] {what} {self.seconds:.1f} s {status}"


R = TypeVar("R", bound=PostedRun)


async def post_all(
    client: httpx.AsyncClient,
    endpoint: Endpoint[Any, Any],
    requests: Sequence[tuple[R, dict[str, Any]]],
    *,
    concurrency: int,
    read: Callable[[R, Any], None],
    done: Callable[[int, R], None] | None = None,
) -> list[R]:
    """POST each (run, body) of `requests` to `endpoint`, `concurrency` at a time. Each run
    keeps its request's failure, time and usage (`PostedRun.took`); `read(run, data)` fills
    it from a successful response; `done(n, run)` follows each (n: how many are done)."""
    gate = asyncio.Semaphore(concurrency)
    finished = 0

    async def one(run: R, body: dict[str, Any]) -> R:
        nonlocal finished
        async with gate:
            posted = await post(client, endpoint, body)
        run.took(posted)
        if posted.error is None:
            read(run, posted.data)
        finished += 1
        if done is not None:
            done(finished, run)
        return run

    return list(await asyncio.gather(*(one(run, body) for run, body in requests)))
