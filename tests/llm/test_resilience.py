"""The judge-call cache (memory and real Redis) and the circuit breaker, against fakes."""

import asyncio
import os
import uuid

import pytest

from rubricate.llm.base import GenerationParams, Message
from rubricate.llm.circuit import CircuitBreakerBackend, CircuitOpenError
from rubricate.llm.errors import TransportError
from rubricate.llm.factory import wrap_backend
from rubricate.llm.fake import FakeBackend
from rubricate.llm.judge_cache import (
    CachingBackend,
    CompletionCache,
    MemoryCompletionCache,
    RedisCompletionCache,
)
from rubricate.llm.settings import LLMSettings

REDIS_URL = os.environ.get("RUBRICATE_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
MSGS = [Message("system", "judge"), Message("user", "score this")]
T0 = GenerationParams(temperature=0.0, max_tokens=10)


@pytest.fixture(params=["memory", "redis"])
async def cache(request: pytest.FixtureRequest) -> CompletionCache:
    if request.param == "memory":
        return MemoryCompletionCache()
    return RedisCompletionCache(REDIS_URL, ttl_s=60, prefix=f"test:{uuid.uuid4().hex}:")


async def test_deterministic_calls_are_cached(cache: CompletionCache) -> None:
    inner = FakeBackend(lambda m, p: f"reply to {m[-1].content}")
    backend = CachingBackend(inner, cache)
    first = await backend.complete(MSGS, T0)
    second = await backend.complete(MSGS, T0)
    assert first.text == second.text == "reply to score this"
    assert len(inner.calls) == 1
    assert second.prompt_tokens == second.completion_tokens == 0  # no model work spent
    # another prompt, other parameters, or sampling: a real call each
    await backend.complete([Message("user", "other")], T0)
    await backend.complete(MSGS, GenerationParams(temperature=0.0, max_tokens=11))
    await backend.complete(MSGS, GenerationParams(temperature=0.7))
    await backend.complete(MSGS, GenerationParams(temperature=0.7))
    assert len(inner.calls) == 5
    await backend.aclose()


async def test_concurrent_identical_calls_are_coalesced() -> None:
    gate = asyncio.Event()

    class Slow(FakeBackend):
        async def complete(self, messages, params):  # type: ignore[no-untyped-def]
            await gate.wait()
            return await super().complete(messages, params)

    inner = Slow(lambda m, p: "once")
    backend = CachingBackend(inner, MemoryCompletionCache())
    tasks = [asyncio.create_task(backend.complete(MSGS, T0)) for _ in range(5)]
    await asyncio.sleep(0.05)
    gate.set()
    results = await asyncio.gather(*tasks)
    assert {r.text for r in results} == {"once"}
    assert len(inner.calls) == 1


async def test_failures_are_not_cached() -> None:
    inner = FakeBackend([TransportError("down"), "ok"])
    backend = CachingBackend(inner, MemoryCompletionCache())
    with pytest.raises(TransportError):
        await backend.complete(MSGS, T0)
    assert (await backend.complete(MSGS, T0)).text == "ok"


async def test_a_dead_cache_is_bypassed() -> None:
    inner = FakeBackend(lambda m, p: "fine")
    dead = RedisCompletionCache("redis://127.0.0.1:1/0", ttl_s=60)
    backend = CachingBackend(inner, dead)
    assert (await backend.complete(MSGS, T0)).text == "fine"
    assert (await backend.complete(MSGS, T0)).text == "fine"
    assert len(inner.calls) == 2
    await backend.aclose()


async def test_circuit_opens_fails_fast_and_recovers() -> None:
    now = [0.0]
    replies: list[str | BaseException] = [TransportError("down")] * 3 + ["back", "again"]
    inner = FakeBackend(replies)
    breaker = CircuitBreakerBackend(inner, failure_threshold=3, cooldown_s=10, clock=lambda: now[0])
    for _ in range(3):
        with pytest.raises(TransportError):
            await breaker.complete(MSGS, T0)
    assert breaker.state == "open"
    with pytest.raises(CircuitOpenError) as info:
        await breaker.complete(MSGS, T0)
    assert info.value.retry_after_s == pytest.approx(10)
    assert len(inner.calls) == 3  # the open circuit did not call the backend
    assert not await breaker.ready()
    now[0] = 11.0
    assert breaker.state == "half_open"
    assert (await breaker.complete(MSGS, T0)).text == "back"
    assert breaker.state == "closed"
    assert (await breaker.complete(MSGS, T0)).text == "again"


async def test_failed_trial_reopens() -> None:
    now = [0.0]
    inner = FakeBackend([TransportError("down"), TransportError("still down")])
    breaker = CircuitBreakerBackend(inner, failure_threshold=1, cooldown_s=5, clock=lambda: now[0])
    with pytest.raises(TransportError):
        await breaker.complete(MSGS, T0)
    now[0] = 6.0
    with pytest.raises(TransportError, match="still down"):
        await breaker.complete(MSGS, T0)
    assert breaker.state == "open"


def test_settings_choose_the_wrappers() -> None:
    inner = FakeBackend()
    wrapped = wrap_backend(inner, LLMSettings(cache="memory"))
    assert isinstance(wrapped, CachingBackend)
    assert isinstance(wrapped.inner, CircuitBreakerBackend)
    assert wrapped.name == inner.name and wrapped.model == inner.model
    assert isinstance(wrap_backend(inner, LLMSettings(cache="off")), CircuitBreakerBackend)
    with pytest.raises(ValueError, match="CACHE_URL"):
        LLMSettings(cache="redis")


async def test_a_call_that_meets_an_open_circuit_waits_for_its_trial() -> None:
    """A judge down for a while (503s with no Retry-After) opens the circuit; a call retried
    through the circuit waits for the trial call instead of spending its retries within the
    cooldown, and is answered once the judge is back (before: every retry met the open
    circuit within a few seconds and the call failed: unscored rollouts at 4,096)."""
    from rubricate.llm.retry import call_with_retries

    now = [0.0]
    down = [TransportError("503", status=503) for _ in range(3)]
    inner = FakeBackend([*down, "back"])
    breaker = CircuitBreakerBackend(inner, failure_threshold=3, cooldown_s=30, clock=lambda: now[0])
    for _ in range(3):  # other calls open the circuit
        with pytest.raises(TransportError):
            await breaker.complete(MSGS, T0)
    slept: list[float] = []

    async def sleep(delay: float) -> None:
        slept.append(delay)
        now[0] += delay

    result = await call_with_retries(
        lambda: breaker.complete(MSGS, T0), max_retries=2, base_s=0.5, max_s=4.0, sleep=sleep
    )
    assert result.text == "back"
    assert slept[0] == pytest.approx(30)  # the circuit's wait, not a jittered half second
    assert breaker.state == "closed"
