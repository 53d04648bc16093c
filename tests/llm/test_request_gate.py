"""How many requests' judge passes a backend takes at once, and in which order
(`llm.request_gate`), per backend kind and prefix cache."""

import asyncio

import pytest

from rubricate.llm.request_gate import RequestGate, requests_at_once
from rubricate.llm.settings import LLMSettings


def settings(**kw: object) -> LLMSettings:
    return LLMSettings.model_validate({"backend": "openai", "base_url": "http://judge/v1", **kw})


@pytest.mark.parametrize(
    ("backend", "kw", "limit"),
    [
        ("embedded", {}, 1),  # one llama.cpp context
        ("openai", {"concurrency": 1}, 1),  # llama-cpp-python's server
        ("openai", {}, None),  # shared cache (vLLM's server): no limit here
        ("openai", {"concurrency": 4, "prefix_cache": "per_slot"}, 4),  # llama-server -np 4
        ("openai", {"prefix_cache": "per_slot"}, 32),  # where the adaptive limit starts
    ],
)
def test_requests_at_once(backend: str, kw: dict[str, object], limit: int | None) -> None:
    assert requests_at_once(settings(**kw), backend) == limit
    assert RequestGate(settings(**kw), backend).passes_back_to_back is (limit is not None)


def test_a_bad_prefix_cache_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="prefix_cache"):
        settings(prefix_cache="per-request")


async def test_the_gate_lets_through_no_more_requests_than_slots() -> None:
    gate = RequestGate(settings(concurrency=3, prefix_cache="per_slot"), "openai")
    inside = 0
    most = 0

    async def one() -> None:
        nonlocal inside, most
        async with gate.request():
            inside += 1
            most = max(most, inside)
            await asyncio.sleep(0.01)
            inside -= 1

    await asyncio.gather(*(one() for _ in range(8)))
    assert (most, inside) == (3, 0)


async def test_a_shared_cache_gate_holds_nothing_back() -> None:
    gate = RequestGate(settings(concurrency=2), "openai")
    entered = asyncio.Event()
    release = asyncio.Event()
    count = 0

    async def one() -> None:
        nonlocal count
        async with gate.request():
            count += 1
            if count == 5:
                entered.set()
            await release.wait()

    tasks = [asyncio.ensure_future(one()) for _ in range(5)]
    await asyncio.wait_for(entered.wait(), 1)  # all five inside at once
    release.set()
    await asyncio.gather(*tasks)
