"""The judge-call limiter (`llm.limiter`, `llm.limit`): the mechanisms, not timings.

Time is a clock of the test's own (`Clock`); "later" is the event loop running what is
ready (`settle`). The server, where one is needed, is a FAKE OpenAI-compatible app
(`FakeJudgeServer`) answering what the test scripts.
"""

import asyncio
from collections.abc import Sequence
from typing import Any

import httpx
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from prometheus_client import REGISTRY, Gauge

from rubricate.llm.base import Completion, GenerationParams, LLMBackend, Message
from rubricate.llm.errors import TransportError
from rubricate.llm.limit import AdaptiveLimit, LimitConfig, RateWindow
from rubricate.llm.limiter import (
    JudgeLimiter,
    LimitedBackend,
    background_work,
    request_scope,
)
from rubricate.llm.openai_compat import OpenAICompatBackend, retry_after_s
from rubricate.llm.request_gate import RequestGate
from rubricate.llm.retry import call_with_retries
from rubricate.llm.settings import LLMSettings


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def settle(turns: int = 20) -> None:
    """Let every task that can run, run (event-loop turns, no wall time)."""
    for _ in range(turns):
        await asyncio.sleep(0)


def fixed(n: int) -> LimitConfig:
    return LimitConfig(start=n, floor=n, ceiling=n)


# --- the arithmetic ------------------------------------------------------------------------


def test_the_limit_doubles_per_round_trip_while_it_holds_calls_back() -> None:
    limit = AdaptiveLimit(LimitConfig(start=8, floor=2, ceiling=100))
    for _ in range(8):  # one round trip of a saturated limit
        limit.on_success(latency_s=1.0, completion_tokens=50, saturated=True, epoch=0)
    assert limit.limit == 16
    for _ in range(200):  # not saturated: the limit is not what holds calls back
        limit.on_success(latency_s=1.0, completion_tokens=50, saturated=False, epoch=0)
    assert limit.limit == 16
    for _ in range(500):
        limit.on_success(latency_s=1.0, completion_tokens=50, saturated=True, epoch=0)
    assert limit.limit == 100  # the ceiling


def test_in_the_slow_start_the_limit_doubles_each_probe_period_calls_wait() -> None:
    limit = AdaptiveLimit(LimitConfig(start=4, floor=1, ceiling=40, probe_s=1.0))
    assert limit.probe(10.0) == 11.0 and limit.limit == 4  # the wait begins
    assert limit.probe(10.6) == 11.0 and limit.limit == 4
    assert limit.probe(11.0) == 12.0 and limit.limit == 8
    assert limit.probe(12.5) == 13.5 and limit.limit == 16
    limit.settled()  # nothing waits: the next wait starts a new period
    assert limit.probe(20.0) == 21.0 and limit.limit == 16
    assert limit.probe(21.0) is not None and limit.limit == 32
    limit.probe(22.0)
    assert limit.limit == 40 and limit.probe(23.0) is None  # the ceiling


def test_the_probe_ends_with_the_slow_start_and_a_fixed_limit_never_probes() -> None:
    limit = AdaptiveLimit(LimitConfig(start=8, floor=1, ceiling=64))
    limit.probe(0.0)
    assert limit.on_overload("rate_limited", epoch=limit.epoch)
    assert limit.probe(5.0) is None and limit.limit == 4
    pinned = AdaptiveLimit(fixed(8))
    assert pinned.probe(0.0) is None and pinned.probe(9.0) is None and pinned.limit == 8


def test_an_overload_halves_the_limit_once_per_round_trip_and_it_recovers() -> None:
    limit = AdaptiveLimit(LimitConfig(start=64, floor=4, ceiling=512))
    epoch = limit.epoch
    assert limit.on_overload("rate_limited", epoch=epoch)
    assert limit.limit == 32
    # the other calls admitted before the back-off report the same overload: no new halving
    assert not limit.on_overload("server_error", epoch=epoch)
    assert limit.limit == 32
    # a call admitted after it is a new signal
    assert limit.on_overload("server_error", epoch=limit.epoch)
    assert limit.limit == 16
    for _ in range(200):
        limit.on_success(latency_s=1.0, completion_tokens=1, saturated=True, epoch=limit.epoch)
    assert limit.limit > 16  # recovers (additively now)
    for _ in range(10):
        limit.on_overload("transport", epoch=limit.epoch)
    assert limit.limit == 4  # never below the floor


def test_a_latency_rise_backs_off_by_a_tenth_and_steady_latency_does_not() -> None:
    limit = AdaptiveLimit(LimitConfig(start=100, floor=4, ceiling=512, latency_rise=2.0))
    for _ in range(100):  # steady: grows (saturated), never backs off
        assert (
            limit.on_success(latency_s=0.5, completion_tokens=1, saturated=True, epoch=limit.epoch)
            is None
        )
    grown = limit.limit
    assert grown > 100
    backed: list[str | None] = []
    for _ in range(30):  # the server queues: the same calls take 5x longer
        backed.append(
            limit.on_success(latency_s=2.5, completion_tokens=1, saturated=True, epoch=limit.epoch)
        )
    assert "latency" in backed
    assert limit.limit < grown
    # generated calls are compared per generated token: a longer answer is not a rise
    other = AdaptiveLimit(LimitConfig(start=100, floor=4, ceiling=512))
    for n in range(200):
        tokens = 50 if n % 2 else 500
        assert (
            other.on_success(
                latency_s=0.02 * tokens, completion_tokens=tokens, saturated=False, epoch=0
            )
            is None
        )


def test_a_fixed_limit_never_moves() -> None:
    limit = AdaptiveLimit(fixed(16))
    limit.on_overload("rate_limited", epoch=0)
    for _ in range(100):
        limit.on_success(latency_s=1.0, completion_tokens=1, saturated=True, epoch=0)
    assert limit.limit == 16


def test_a_rate_window_holds_its_budget_in_any_window() -> None:
    window = RateWindow(10, window_s=60.0)
    assert window.wait_s(4, 0.0) == 0.0
    first = window.take(4, 0.0)
    window.take(4, 10.0)
    assert window.wait_s(4, 20.0) == pytest.approx(40.0)  # the first start leaves at 60
    window.settle(first, 1, 20.0)  # it used 1, not 4
    assert window.wait_s(4, 20.0) == 0.0
    window.take(5, 20.0)
    assert window.used(20.0) == 10
    assert window.wait_s(1, 59.0) == pytest.approx(1.0)
    assert window.used(60.0) == 9  # the first start left the window
    # a start bigger than the whole budget goes alone once the window is empty
    assert window.wait_s(50, 60.0) > 0
    assert window.wait_s(50, 80.0) == 0.0


# --- queueing ------------------------------------------------------------------------------


class Calls:
    """Callers that hold their place until the test lets them go."""

    def __init__(self, limiter: JudgeLimiter) -> None:
        self.limiter = limiter
        self.started: list[str] = []
        self.inside = 0
        self.most = 0
        self.release: dict[str, asyncio.Event] = {}
        self.tasks: dict[str, asyncio.Task[None]] = {}

    async def _one(self, name: str, tokens: float, used: int | None) -> None:
        async with self.limiter.call(tokens=tokens) as out:
            self.started.append(name)
            self.inside += 1
            self.most = max(self.most, self.inside)
            try:
                await self.release[name].wait()
            finally:
                self.inside -= 1
            out.answer(prompt_tokens=int(tokens) if used is None else used, completion_tokens=0)

    def start(
        self,
        name: str,
        *,
        background: bool = False,
        tokens: float = 0.0,
        used: int | None = None,
    ) -> None:
        """`tokens`: the call's estimate; `used`: what it reports (default: the estimate)."""
        self.release[name] = asyncio.Event()
        if background:
            with background_work():
                self.tasks[name] = asyncio.ensure_future(self._one(name, tokens, used))
        else:
            self.tasks[name] = asyncio.ensure_future(self._one(name, tokens, used))

    async def finish(self, name: str) -> None:
        self.release[name].set()
        await self.tasks[name]
        await settle()


async def test_queued_calls_start_in_arrival_order_the_moment_a_place_frees() -> None:
    limiter = JudgeLimiter(fixed(3), backend="fake")
    calls = Calls(limiter)
    names = [f"c{i}" for i in range(10)]
    for name in names:
        calls.start(name)
        await asyncio.sleep(0)  # arrival order
    await settle()
    assert calls.started == ["c0", "c1", "c2"] and limiter.queued() == 7
    for name in ["c1", "c0", "c2", "c4", "c3", "c6", "c5"]:
        await calls.finish(name)
        # a freed place never sits idle while calls wait
        assert limiter.in_flight == 3 == calls.inside
    assert calls.started == names  # first come, first served
    for name in ["c7", "c8", "c9"]:
        await calls.finish(name)
    assert (calls.most, limiter.in_flight, limiter.queued()) == (3, 0, 0)


async def test_a_caller_that_gives_up_strands_no_place() -> None:
    limiter = JudgeLimiter(fixed(1), backend="fake")
    calls = Calls(limiter)
    for name in ["a", "b", "c", "d"]:
        calls.start(name)
        await asyncio.sleep(0)
    await settle()
    calls.tasks["b"].cancel()  # gives up while queued
    await settle()
    calls.release["a"].set()
    await asyncio.sleep(0)  # "a" ends and hands its place to "c" ...
    calls.tasks["c"].cancel()  # ... which is cancelled before it runs
    await settle()
    assert calls.started == ["a", "d"]  # the place went on to "d"
    assert limiter.in_flight == 1 and calls.inside == 1
    await calls.finish("d")
    assert (limiter.in_flight, limiter.queued()) == (0, 0)


async def test_calls_that_wait_through_a_probe_period_raise_the_limit_without_answers() -> None:
    """Long judge calls (rubric generation) give no answers to grow on for seconds: while
    calls wait, the slow start doubles the limit every probe period on its own."""
    clock = Clock()
    limiter = JudgeLimiter(
        LimitConfig(start=2, floor=1, ceiling=16, probe_s=1.0), backend="fake", clock=clock
    )
    calls = Calls(limiter)
    for i in range(12):
        calls.start(f"c{i}")
        await asyncio.sleep(0)
    await settle()
    assert limiter.in_flight == 2 and limiter.queued() == 10
    clock.now += 1.0
    limiter.poke()
    await settle()
    assert limiter.limit == 4 and limiter.in_flight == 4
    clock.now += 1.0
    limiter.poke()
    await settle()
    assert limiter.limit == 8 and limiter.in_flight == 8
    for name in list(calls.tasks):
        if name in calls.started:
            await calls.finish(name)
    await settle()
    assert limiter.queued() == 0


async def test_a_grown_limit_wakes_the_waiting_calls_at_once() -> None:
    limiter = JudgeLimiter(LimitConfig(start=2, floor=1, ceiling=10), backend="fake")
    calls = Calls(limiter)
    for i in range(6):
        calls.start(f"c{i}")
    await settle()
    assert limiter.in_flight == 2
    await calls.finish("c0")  # answered while saturated: slow start, the limit grows to 3
    assert limiter.limit == 3 and limiter.in_flight == 3


# --- lanes ---------------------------------------------------------------------------------


async def test_live_calls_go_before_background_calls() -> None:
    limiter = JudgeLimiter(fixed(1), backend="fake")
    calls = Calls(limiter)
    calls.start("live0")
    await settle()
    calls.start("bg1", background=True)
    await settle()
    calls.start("live1")
    await settle()
    calls.start("bg2", background=True)
    await settle()
    calls.start("live2")
    await settle()
    assert (limiter.queued("live"), limiter.queued("background")) == (2, 2)
    for name in ["live0", "live1", "live2", "bg1", "bg2"]:
        await calls.finish(name)
    assert calls.started == ["live0", "live1", "live2", "bg1", "bg2"]


async def test_background_work_holds_at_most_its_share_and_live_work_finds_room() -> None:
    limiter = JudgeLimiter(fixed(8), backend="fake", background_share=0.25)
    calls = Calls(limiter)
    for i in range(10):
        calls.start(f"bg{i}", background=True)
    await settle()
    assert limiter.in_flight == 2 == limiter.background_in_flight  # 0.25 of 8
    calls.start("live")
    await settle()
    assert "live" in calls.started and limiter.in_flight == 3
    await calls.finish("bg0")
    assert calls.started[-1] == "bg2" and limiter.background_in_flight == 2


class RecordingBackend(LLMBackend):
    """A FAKE model: records the order its calls run in; each call takes a few loop turns."""

    name = "fake"
    model = "fake"

    def __init__(self) -> None:
        self.order: list[str] = []
        self.running = 0

    async def complete(self, messages: Sequence[Message], params: GenerationParams) -> Completion:
        self.running += 1
        assert self.running == 1, "one call at a time"
        self.order.append(messages[-1].content)
        await settle(3)
        self.running -= 1
        return Completion(
            text="ok", prompt_tokens=10, completion_tokens=2, latency_s=0.0, model="m", backend="b"
        )


async def test_a_shared_model_serves_live_requests_first_and_keeps_passes_together() -> None:
    """Embedded mode: one model, a call at a time, the live verifier's and the audit's
    reference judge's requests on it. A live request's passes go back to back; a live
    request waiting behind another goes before an audit request that waited longer."""
    fake = RecordingBackend()
    llm = LLMSettings(concurrency=1)
    backend = LimitedBackend(
        fake, JudgeLimiter.from_settings(llm, backend="fake", judge="live", per_request=True)
    )
    live_gate = RequestGate(llm, "fake")
    audit_gate = RequestGate(llm, "fake")

    async def request(gate: RequestGate, name: str, passes: int = 3) -> None:
        async with gate.request():
            for n in range(passes):
                await backend.complete([Message("user", f"{name}.{n}")], GenerationParams())

    async def audit(name: str) -> None:
        with background_work():
            await request(audit_gate, name)

    live1 = asyncio.ensure_future(request(live_gate, "L1"))
    await settle(2)  # L1 holds the model
    audits = [asyncio.ensure_future(audit("A1")), asyncio.ensure_future(audit("A2"))]
    await settle(2)
    live2 = asyncio.ensure_future(request(live_gate, "L2"))  # waits on the verifier's gate
    live3 = asyncio.ensure_future(request(live_gate, "L3"))
    await asyncio.gather(live1, live2, live3, *audits)
    owners = [call.split(".")[0] for call in fake.order]
    assert owners == ["L1"] * 3 + ["L2"] * 3 + ["L3"] * 3 + ["A1"] * 3 + ["A2"] * 3


async def test_an_audit_request_in_progress_finishes_its_passes_before_live_work() -> None:
    """Not preemptive: a live call waits for the audit request that holds the model (one
    rollout's passes), then goes before the next audit request."""
    fake = RecordingBackend()
    llm = LLMSettings(concurrency=1)
    backend = LimitedBackend(
        fake, JudgeLimiter.from_settings(llm, backend="fake", judge="live", per_request=True)
    )
    audit_gate = RequestGate(llm, "fake")

    async def audit(name: str) -> None:
        with background_work():
            async with audit_gate.request():
                for n in range(3):
                    await backend.complete([Message("user", f"{name}.{n}")], GenerationParams())

    a1 = asyncio.ensure_future(audit("A1"))
    a2 = asyncio.ensure_future(audit("A2"))
    await settle(2)
    live = asyncio.ensure_future(backend.complete([Message("user", "L.0")], GenerationParams()))
    await asyncio.gather(a1, a2, live)
    assert [c.split(".")[0] for c in fake.order] == ["A1"] * 3 + ["L"] + ["A2"] * 3


async def test_calls_of_one_request_in_parallel_share_its_place() -> None:
    limiter = JudgeLimiter(fixed(1), backend="fake", per_request=True)
    calls = Calls(limiter)
    with request_scope():
        calls.start("p1")
        calls.start("p2")
    await settle()
    assert calls.started == ["p1", "p2"] and limiter.in_flight == 1


# --- budgets -------------------------------------------------------------------------------


async def test_requests_per_minute_hold() -> None:
    clock = Clock()
    limiter = JudgeLimiter(fixed(100), backend="fake", rpm=3, clock=clock)
    calls = Calls(limiter)
    for i in range(7):
        calls.start(f"c{i}")
        await asyncio.sleep(0)
    await settle()
    assert calls.started == ["c0", "c1", "c2"]
    for name in ["c0", "c1", "c2"]:
        await calls.finish(name)
    assert calls.started == ["c0", "c1", "c2"]  # places free, the minute's budget is spent
    clock.now += 59.9
    limiter.poke()
    await settle()
    assert len(calls.started) == 3
    clock.now += 0.1
    limiter.poke()
    await settle()
    assert calls.started == ["c0", "c1", "c2", "c3", "c4", "c5"]
    limiter.close()


async def test_tokens_per_minute_hold_and_count_what_calls_really_used() -> None:
    clock = Clock()
    limiter = JudgeLimiter(fixed(100), backend="fake", tpm=100, clock=clock)
    calls = Calls(limiter)
    calls.start("a", tokens=40, used=10)
    calls.start("b", tokens=40)
    calls.start("c", tokens=40)
    calls.start("d", tokens=40)
    await settle()
    assert calls.started == ["a", "b"]  # 80 of 100: another 40 would go over
    await calls.finish("b")  # used its estimate: nothing frees before the minute is over
    assert calls.started == ["a", "b"]
    await calls.finish("a")  # used 10 of its 40: 50 of 100 now, room for "c" but not "d"
    assert calls.started == ["a", "b", "c"]
    clock.now += 60  # the window moved past "a" and "b"
    limiter.poke()
    await settle()
    assert calls.started == ["a", "b", "c", "d"]
    limiter.close()


# --- a FAKE OpenAI-compatible server: 429, 5xx, Retry-After --------------------------------


class FakeJudgeServer:
    """A FAKE OpenAI-compatible chat server: answers each call with the next scripted status
    (200 once the script is empty); 429 and 503 carry `Retry-After` when scripted so."""

    def __init__(self) -> None:
        self.script: list[tuple[int, str | None]] = []
        self.calls = 0
        self.hold: asyncio.Event | None = None
        self.app = FastAPI()
        self.app.post("/v1/chat/completions")(self._chat)

    async def _chat(self, request: Request) -> Any:
        await request.json()
        self.calls += 1
        await settle(2)  # the other calls in flight arrive meanwhile
        if self.hold is not None:
            await self.hold.wait()
        status, retry_after = self.script.pop(0) if self.script else (200, None)
        if status != 200:
            headers = {} if retry_after is None else {"Retry-After": retry_after}
            return JSONResponse({"error": "busy"}, status_code=status, headers=headers)
        return {
            "choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5},
        }


def served(
    server: FakeJudgeServer, config: LimitConfig, clock: Clock
) -> tuple[LimitedBackend, JudgeLimiter]:
    raw = OpenAICompatBackend(
        base_url="http://judge/v1", model="m", transport=httpx.ASGITransport(app=server.app)
    )
    limiter = JudgeLimiter(config, backend="openai", clock=clock)
    return LimitedBackend(raw, limiter), limiter


def backoffs(reason: str) -> float:
    value = REGISTRY.get_sample_value(
        "rubricate_llm_limit_backoffs_total",
        {"backend": "openai", "judge": "live", "reason": reason},
    )
    return value or 0.0


async def call(backend: LLMBackend) -> Completion:
    return await backend.complete([Message("user", "score this")], GenerationParams())


async def test_the_limit_backs_off_on_429_and_5xx_honours_retry_after_and_recovers() -> None:
    server = FakeJudgeServer()
    clock = Clock()
    backend, limiter = served(server, LimitConfig(start=8, floor=2, ceiling=64), clock)
    await asyncio.gather(*(call(backend) for _ in range(24)))  # saturated: grows
    grown = limiter.limit
    assert grown > 8

    rate_limited = backoffs("rate_limited")
    server.script = [(429, "7")]
    with pytest.raises(TransportError) as caught:
        await call(backend)
    assert (caught.value.status, caught.value.retry_after_s) == (429, 7.0)
    assert limiter.limit == grown // 2
    assert backoffs("rate_limited") == rate_limited + 1
    assert limiter.queued() == 0

    # Retry-After: no new call reaches the server before it has passed
    sent = server.calls
    waiting = asyncio.ensure_future(call(backend))
    await settle()
    assert server.calls == sent and limiter.queued() == 1
    clock.now += 7
    limiter.poke()
    await waiting
    assert server.calls == sent + 1

    halved = limiter.limit
    server.script = [(503, None)]
    with pytest.raises(TransportError) as caught:
        await call(backend)
    assert caught.value.status == 503 and caught.value.retry_after_s is None
    assert limiter.limit == halved // 2

    backed_off = limiter.limit
    await asyncio.gather(*(call(backend) for _ in range(40)))
    assert limiter.limit > backed_off  # recovers
    await backend.aclose()


async def test_429s_of_one_round_trip_back_off_once() -> None:
    server = FakeJudgeServer()
    backend, limiter = served(server, LimitConfig(start=16, floor=2, ceiling=64), Clock())
    server.script = [(429, None)] * 8
    server.hold = asyncio.Event()
    pending = [asyncio.ensure_future(call(backend)) for _ in range(8)]
    await settle(50)
    server.hold.set()
    results = await asyncio.gather(*pending, return_exceptions=True)
    assert all(isinstance(r, TransportError) and r.status == 429 for r in results)
    assert limiter.limit == 8  # halved once, not eight times
    await backend.aclose()


def test_retry_after_is_read_as_seconds_or_a_date() -> None:
    from datetime import UTC, datetime

    now = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
    assert retry_after_s("120") == 120.0
    assert retry_after_s("1.5") == 1.5
    assert retry_after_s("Thu, 01 Jan 2026 12:00:30 GMT", now=now) == 30.0
    assert retry_after_s("Thu, 01 Jan 2026 11:00:00 GMT", now=now) == 0.0
    assert retry_after_s("soon") is None
    assert retry_after_s("inf") is None
    assert retry_after_s(None) is None


async def test_a_retry_waits_at_least_the_servers_retry_after() -> None:
    slept: list[float] = []

    async def sleep(delay: float) -> None:
        slept.append(delay)

    failures = [
        TransportError("HTTP 429", status=429, retry_after_s=7.0),
        TransportError("connection refused"),
    ]

    async def flaky() -> str:
        if failures:
            raise failures.pop(0)
        return "ok"

    out = await call_with_retries(
        flaky, max_retries=3, base_s=0.5, max_s=20.0, sleep=sleep, rand=lambda: 0.5
    )
    assert out == "ok"
    assert slept == [7.0, 0.5]  # Retry-After over the backoff; then the backoff (0.5 * 2 / 2)


async def test_429s_do_not_open_the_circuit_and_5xx_do() -> None:
    from rubricate.llm.circuit import CircuitBreakerBackend
    from rubricate.llm.factory import wrap_backend

    server = FakeJudgeServer()
    llm = LLMSettings(backend="openai", base_url="http://judge/v1", circuit_failures=2, cache="off")
    raw = OpenAICompatBackend(
        base_url="http://judge/v1", model="m", transport=httpx.ASGITransport(app=server.app)
    )
    backend = wrap_backend(raw, llm)
    assert isinstance(backend, CircuitBreakerBackend)
    server.script = [(429, None)] * 3
    for _ in range(3):
        with pytest.raises(TransportError):
            await call(backend)
    assert backend.state == "closed"  # the server is up and asks for fewer calls
    server.script = [(503, None)] * 2
    for _ in range(2):
        with pytest.raises(TransportError):
            await call(backend)
    assert backend.state == "open"
    await backend.aclose()


async def test_the_gauges_show_the_limit_the_calls_in_flight_and_the_queues() -> None:
    def gauge(name: str, **labels: str) -> float | None:
        return REGISTRY.get_sample_value(name, {"backend": "gauged", "judge": "live", **labels})

    limiter = JudgeLimiter(fixed(2), backend="gauged")
    calls = Calls(limiter)
    for i in range(3):
        calls.start(f"c{i}")
    calls.start("bg", background=True)
    await settle()
    assert gauge("rubricate_llm_concurrency_limit") == 2
    assert gauge("rubricate_llm_in_flight") == 2
    assert gauge("rubricate_llm_queued", lane="live") == 1
    assert gauge("rubricate_llm_queued", lane="background") == 1
    for name in ["c0", "c1", "c2", "bg"]:
        await calls.finish(name)
    assert gauge("rubricate_llm_in_flight") == 0
    assert gauge("rubricate_llm_queued", lane="live") == 0
    assert gauge("rubricate_llm_queued", lane="background") == 0


async def test_a_gauge_is_written_only_when_its_value_changes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The limiter looks at its state several times per call; an unchanged value is not
    written again (a gauge write is a locked write to a memory-mapped file in a
    multi-process worker), and the gauges still show every change."""
    writes: list[float] = []
    real_set = Gauge.set

    def counted(self: Gauge, value: float) -> None:
        writes.append(value)
        real_set(self, value)

    monkeypatch.setattr(Gauge, "set", counted)
    limiter = JudgeLimiter(fixed(2), backend="gauged-once")
    assert len(writes) == 4  # the four gauges, once each
    for _ in range(10):
        limiter.poke()  # nothing changed
    assert len(writes) == 4
    calls = Calls(limiter)
    calls.start("c0")
    await settle()
    assert writes[4:] == [1]  # in flight 0 -> 1; the limit and the queues as they were
    await calls.finish("c0")
    assert writes[4:] == [1, 0]
    assert (
        REGISTRY.get_sample_value(
            "rubricate_llm_in_flight", {"backend": "gauged-once", "judge": "live"}
        )
        == 0
    )
