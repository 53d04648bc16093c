"""How many judge calls a backend has in flight, and whose go first.

Every built backend is wrapped in a `LimitedBackend` (`llm.factory`): its `JudgeLimiter` is
shared by every service on that backend in the process (both model servers in embedded mode,
the audit's reference judge when it is the live model).

- **The limit adapts to the server** (`llm.limit.AdaptiveLimit`): it starts at
  `RUBRICATE_LLM_CONCURRENCY_START`, grows while the limit is what holds calls back, and
  backs off on a 429, a 5xx, a call the server did not answer, or a latency rise, between
  `CONCURRENCY_MIN` and `CONCURRENCY_MAX`. `RUBRICATE_LLM_CONCURRENCY` fixes it; the
  embedded backend takes one call at a time.
- **Retry-After**: a server that answers with one (a 429, a 503) gets no new call from this
  process until it has passed (at most `MAX_PAUSE_S`); the calls in flight go on.
- **Per-minute budgets** (`RUBRICATE_LLM_RPM`, `RUBRICATE_LLM_TPM`): at most so many calls,
  or tokens, start in any 60 s (`llm.limit.RateWindow`).
- **Queued calls are served first come, first served**, and a freed place goes at once to
  the next caller: a place never sits idle while a call waits for one (only a Retry-After
  pause or a spent budget holds calls back, and a timer wakes them when it ends).
- **Two lanes**: live judge work, and background work (the audit's reference judge,
  `background_work()`). A background call starts only when no live call waits, holds at
  most `RUBRICATE_LLM_BACKGROUND_SHARE` of the limit (at least one call), and a place a call
  frees is offered to live callers for one turn of the event loop before a background call
  gets it (a live request's next pass, or a request woken behind it, comes first).
- **Whole requests** where the server caches prefixes per slot or takes one call at a time
  (`llm.request_gate`): a request's passes hold one place from the first pass to the end of
  the request (`RequestToken`), so no other caller's call, live or background, lands
  between them.

Gauges (`common.metrics`): the limit, the calls in flight and the calls queued per lane,
by backend and judge (`live` | `reference`); a counter of back-offs by reason.
"""

import asyncio
import logging
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Final, Literal

from rubricate.common.deadlines import time_left
from rubricate.common.metrics import (
    LLM_JUDGE_BACKOFFS,
    LLM_JUDGE_IN_FLIGHT,
    LLM_JUDGE_LIMIT,
    LLM_JUDGE_QUEUED,
)
from rubricate.llm.base import (
    ChoiceScores,
    Completion,
    GenerationParams,
    LLMBackend,
    Message,
    WrappingBackend,
)
from rubricate.llm.errors import DeadlineExceeded, TransportError
from rubricate.llm.limit import AdaptiveLimit, LimitConfig, Overload, RateWindow
from rubricate.llm.settings import LLMSettings

log = logging.getLogger("rubricate.llm.limiter")

Lane = Literal["live", "background"]
Judge = Literal["live", "reference"]

MAX_PAUSE_S: Final = 60.0
"""The longest a server's Retry-After holds new calls back."""
CHARS_PER_TOKEN: Final = 3.0
"""Prompt characters per token in a call's estimate (a low figure: estimates run high)."""

_LANE: ContextVar[Lane] = ContextVar("rubricate_judge_lane", default="live")
_REQUEST: ContextVar["RequestToken | None"] = ContextVar("rubricate_judge_request", default=None)


@contextmanager
def background_work() -> Iterator[None]:
    """Judge calls made inside (and in tasks started inside) go in the background lane."""
    reset = _LANE.set("background")
    try:
        yield
    finally:
        _LANE.reset(reset)


def current_lane() -> Lane:
    return _LANE.get()


@dataclass(eq=False)
class _Lease:
    """One place in a limiter, held by a call or by a whole request."""

    lane: Lane
    ended: bool = False


class RequestToken:
    """One request's judge passes (`llm.request_gate`): a limiter that takes whole requests
    gives it one place at its first call and takes it back when the request ends."""

    def __init__(self) -> None:
        self._leases: dict[int, tuple[JudgeLimiter, _Lease]] = {}

    def lease(self, limiter: "JudgeLimiter") -> _Lease | None:
        held = self._leases.get(id(limiter))
        return None if held is None else held[1]

    def keep(self, limiter: "JudgeLimiter", lease: _Lease) -> None:
        self._leases[id(limiter)] = (limiter, lease)

    def close(self) -> None:
        leases, self._leases = list(self._leases.values()), {}
        for limiter, lease in leases:
            limiter.end_lease(lease)


@contextmanager
def request_scope() -> Iterator[RequestToken]:
    """The calls made inside belong to one request (the enclosing one's, when nested)."""
    outer = _REQUEST.get()
    if outer is not None:
        yield outer
        return
    token = RequestToken()
    reset = _REQUEST.set(token)
    try:
        yield token
    finally:
        _REQUEST.reset(reset)
        token.close()


@dataclass(eq=False)
class _Waiter:
    lane: Lane
    token: RequestToken | None
    tokens: float
    future: "asyncio.Future[None]"
    lease: _Lease | None = None
    owns_lease: bool = False
    epoch: int = 0
    started: float = 0.0
    tpm_entry: list[float] | None = None


@dataclass
class CallOutcome:
    """What the wrapped backend reports of an answered call."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    answered: bool = False

    def answer(self, *, prompt_tokens: int, completion_tokens: int) -> None:
        self.prompt_tokens = prompt_tokens
        self.completion_tokens = completion_tokens
        self.answered = True


@dataclass
class _Queues:
    held: deque[_Waiter] = field(default_factory=deque)
    """Calls of a request that holds a place already: they wait only for pause and budget."""
    live: deque[_Waiter] = field(default_factory=deque)
    background: deque[_Waiter] = field(default_factory=deque)


class JudgeLimiter:
    def __init__(
        self,
        config: LimitConfig,
        *,
        backend: str,
        judge: Judge = "live",
        per_request: bool = False,
        background_share: float = 0.25,
        rpm: int | None = None,
        tpm: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not 0 < background_share <= 1:
            raise ValueError("background_share must be within (0, 1]")
        self.limit_state = AdaptiveLimit(config)
        self.backend = backend
        self.judge = judge
        self.per_request = per_request
        self.background_share = background_share
        self._rpm = None if rpm is None else RateWindow(rpm)
        self._tpm = None if tpm is None else RateWindow(tpm)
        self._clock = clock
        self._queues = _Queues()
        self.in_flight = 0
        self.background_in_flight = 0
        self.paused_until = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0
        self._deferred = False
        self._gauges = (
            LLM_JUDGE_LIMIT.labels(backend, judge),
            LLM_JUDGE_IN_FLIGHT.labels(backend, judge),
            LLM_JUDGE_QUEUED.labels(backend, judge, "live"),
            LLM_JUDGE_QUEUED.labels(backend, judge, "background"),
        )
        self._published: list[int | None] = [None] * len(self._gauges)
        """The values the gauges were last set to."""
        self._publish()

    @classmethod
    def from_settings(
        cls, settings: LLMSettings, *, backend: str, judge: Judge, per_request: bool
    ) -> "JudgeLimiter":
        start, floor, ceiling = settings.concurrency_bounds()
        return cls(
            LimitConfig(
                start=start,
                floor=floor,
                ceiling=ceiling,
                latency_rise=settings.concurrency_latency_rise,
            ),
            backend=backend,
            judge=judge,
            per_request=per_request,
            background_share=settings.background_share,
            rpm=settings.rpm,
            tpm=settings.tpm,
        )

    # --- state --------------------------------------------------------------------------

    @property
    def limit(self) -> int:
        return self.limit_state.limit

    @property
    def background_limit(self) -> int:
        return max(1, int(self.limit * self.background_share))

    def queued(self, lane: Lane | None = None) -> int:
        q = self._queues
        if lane == "live":
            return len(q.held) + len(q.live)
        if lane == "background":
            return len(q.background)
        return len(q.held) + len(q.live) + len(q.background)

    def _publish(self) -> None:
        """Set the gauges whose value changed since they were last set: this runs several
        times per call, and a gauge write is not free (a locked write to a memory-mapped
        file in a multi-process worker: 6 % of the audit worker's CPU, docs/benchmarks.md)."""
        q = self._queues
        values = (
            self.limit,
            self.in_flight,
            len(q.held) + len(q.live),
            len(q.background),
        )
        for k, value in enumerate(values):
            if self._published[k] != value:
                self._published[k] = value
                self._gauges[k].set(value)

    # --- one call -----------------------------------------------------------------------

    @asynccontextmanager
    async def call(self, *, tokens: float = 0.0) -> AsyncIterator[CallOutcome]:
        """Hold a place for one judge call (`tokens`: its estimate, for the TPM budget);
        the body reports the answer on the `CallOutcome`. A call still queued when the
        request's deadline passes is `DeadlineExceeded`, never sent."""
        lane = _LANE.get()
        token = _REQUEST.get() if self.per_request else None
        waiter = _Waiter(
            lane=lane, token=token, tokens=tokens, future=asyncio.get_running_loop().create_future()
        )
        if token is not None and token.lease(self) is not None:
            self._queues.held.append(waiter)
        elif lane == "live":
            self._queues.live.append(waiter)
        else:
            self._queues.background.append(waiter)
        self._dispatch(background_now=True)
        await self._wait(waiter)
        outcome = CallOutcome()
        try:
            yield outcome
        except TransportError as exc:
            self._on_failure(waiter, exc)
            raise
        else:
            if outcome.answered:
                self._on_answer(waiter, outcome)
        finally:
            if waiter.owns_lease and waiter.lease is not None:
                self.end_lease(waiter.lease)

    async def _wait(self, waiter: _Waiter) -> None:
        left = time_left()
        try:
            if left is None:
                await waiter.future
                return
            done, _ = await asyncio.wait({waiter.future}, timeout=max(left, 0.0))
        except asyncio.CancelledError:
            self._abandon(waiter)
            raise
        if not done:
            self._abandon(waiter)
            raise DeadlineExceeded(
                f"the request's deadline passed while its judge call waited for a place "
                f"({self.in_flight} calls in flight, limit {self.limit})"
            )

    def _abandon(self, waiter: _Waiter) -> None:
        """A waiter that gave up: out of its queue, and what it was granted back."""
        if waiter.future.done() and not waiter.future.cancelled():
            if waiter.owns_lease and waiter.lease is not None:
                self.end_lease(waiter.lease)
            return
        waiter.future.cancel()
        for queue in (self._queues.held, self._queues.live, self._queues.background):
            try:
                queue.remove(waiter)
            except ValueError:
                continue
            break
        self._publish()
        self._dispatch(background_now=False)

    def end_lease(self, lease: _Lease) -> None:
        if lease.ended:
            return
        lease.ended = True
        self.in_flight -= 1
        if lease.lane == "background":
            self.background_in_flight -= 1
        self._publish()
        self._dispatch(background_now=False)

    # --- outcomes -----------------------------------------------------------------------

    def _on_answer(self, waiter: _Waiter, outcome: CallOutcome) -> None:
        now = self._clock()
        if self._tpm is not None and waiter.tpm_entry is not None:
            used = outcome.prompt_tokens + outcome.completion_tokens
            self._tpm.settle(waiter.tpm_entry, max(used, 1), now)
        before = self.limit
        saturated = self.in_flight + len(self._queues.live) + len(self._queues.background) >= (
            before
        )
        backed_off = self.limit_state.on_success(
            latency_s=now - waiter.started,
            completion_tokens=outcome.completion_tokens,
            saturated=saturated,
            epoch=waiter.epoch,
        )
        if backed_off is not None:
            self._backed_off(backed_off, before)
        if self.limit != before:
            self._publish()
            self._dispatch(background_now=False)

    def _on_failure(self, waiter: _Waiter, exc: TransportError) -> None:
        kind: Overload
        if exc.status == 429:
            kind = "rate_limited"
        elif exc.status is not None and exc.status >= 500:
            kind = "server_error"
        else:
            kind = "transport"
        before = self.limit
        if self.limit_state.on_overload(kind, epoch=waiter.epoch):
            self._backed_off(kind, before)
        if exc.retry_after_s is not None and exc.retry_after_s > 0:
            until = self._clock() + min(exc.retry_after_s, MAX_PAUSE_S)
            if until > self.paused_until:
                self.paused_until = until
                log.info(
                    "llm.limiter_paused backend=%s judge=%s seconds=%.1f status=%s",
                    self.backend,
                    self.judge,
                    min(exc.retry_after_s, MAX_PAUSE_S),
                    exc.status,
                )
        self._publish()

    def _backed_off(self, kind: Overload, before: int) -> None:
        LLM_JUDGE_BACKOFFS.labels(self.backend, self.judge, kind).inc()
        log.info(
            "llm.limit_backoff backend=%s judge=%s reason=%s limit=%d->%d",
            self.backend,
            self.judge,
            kind,
            before,
            self.limit,
        )

    # --- granting -----------------------------------------------------------------------

    def poke(self) -> None:
        """Look again at what may start (the timers do this when a pause or a budget
        ends; tests with a clock of their own call it after moving the clock)."""
        self._dispatch(background_now=False)

    def _dispatch(self, *, background_now: bool) -> None:
        now = self._clock()
        if now < self.paused_until:
            self._wake_at(self.paused_until, now)
            return
        q = self._queues
        for queue in (q.held, q.live):
            while queue:
                waiter = queue[0]
                if waiter.future.done():
                    queue.popleft()
                    continue
                needs_place = waiter.token is None or waiter.token.lease(self) is None
                if needs_place and self.in_flight >= self.limit:
                    if self._probed(now):
                        continue  # the slow start's time probe raised the limit
                    break
                wait = self._budget_wait(waiter, now)
                if wait > 0:
                    self._wake_at(now + wait, now)
                    self._publish()
                    return
                queue.popleft()
                self._grant(waiter, needs_place, now)
        if not q.held and not q.live:
            self.limit_state.settled()
        while q.background and q.background[0].future.done():
            q.background.popleft()
        if (
            q.background
            and not q.live
            and self.in_flight < self.limit
            and self.background_in_flight < self.background_limit
        ):
            if background_now:
                self._grant_background(now)
            elif not self._deferred:
                # a freed place goes to live callers first: one turn of the loop for the
                # caller that freed it (or one it woke) to ask again
                self._deferred = True
                asyncio.get_running_loop().call_soon(self._deferred_dispatch)
        self._publish()

    def _probed(self, now: float) -> bool:
        """Calls wait for a place: let the slow start's time probe raise the limit
        (`AdaptiveLimit.probe`); True when it did. Else look again when it may."""
        before = self.limit
        again = self.limit_state.probe(now)
        if self.limit > before:
            log.info(
                "llm.limit_probe backend=%s judge=%s limit=%d->%d",
                self.backend,
                self.judge,
                before,
                self.limit,
            )
            return True
        if again is not None:
            self._wake_at(again, now)
        return False

    def _deferred_dispatch(self) -> None:
        self._deferred = False
        self._dispatch(background_now=True)

    def _grant_background(self, now: float) -> None:
        q = self._queues
        while (
            q.background
            and not q.live
            and self.in_flight < self.limit
            and self.background_in_flight < self.background_limit
        ):
            waiter = q.background[0]
            if waiter.future.done():
                q.background.popleft()
                continue
            needs_place = waiter.token is None or waiter.token.lease(self) is None
            wait = self._budget_wait(waiter, now)
            if wait > 0:
                self._wake_at(now + wait, now)
                return
            q.background.popleft()
            self._grant(waiter, needs_place, now)

    def _budget_wait(self, waiter: _Waiter, now: float) -> float:
        wait = 0.0
        if self._rpm is not None:
            wait = max(wait, self._rpm.wait_s(1, now))
        if self._tpm is not None:
            wait = max(wait, self._tpm.wait_s(waiter.tokens, now))
        return wait

    def _grant(self, waiter: _Waiter, needs_place: bool, now: float) -> None:
        if needs_place:
            lease = _Lease(lane=waiter.lane)
            self.in_flight += 1
            if lease.lane == "background":
                self.background_in_flight += 1
            waiter.lease = lease
            if waiter.token is not None:
                waiter.token.keep(self, lease)
            else:
                waiter.owns_lease = True
        waiter.epoch = self.limit_state.epoch
        waiter.started = now
        if self._rpm is not None:
            self._rpm.take(1, now)
        if self._tpm is not None:
            waiter.tpm_entry = self._tpm.take(waiter.tokens, now)
        waiter.future.set_result(None)

    def _wake_at(self, when: float, now: float) -> None:
        if self._timer is not None and self._timer_at <= when:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = when
        self._timer = asyncio.get_running_loop().call_later(max(when - now, 0.0), self._fire)

    def _fire(self) -> None:
        self._timer = None
        self._dispatch(background_now=True)

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


def estimate_tokens(messages: Sequence[Message], max_tokens: int) -> float:
    """A call's tokens before it is made: its prompt at `CHARS_PER_TOKEN`, a few tokens of
    chat template per message, and every token it may generate."""
    chars = sum(len(m.content) for m in messages)
    return chars / CHARS_PER_TOKEN + 4 * len(messages) + max_tokens


class LimitedBackend(WrappingBackend):
    """A backend behind its `JudgeLimiter`."""

    def __init__(self, inner: LLMBackend, limiter: JudgeLimiter) -> None:
        super().__init__(inner)
        self.limiter = limiter

    async def complete(self, messages: Sequence[Message], params: GenerationParams) -> Completion:
        async with self.limiter.call(tokens=estimate_tokens(messages, params.max_tokens)) as out:
            result = await self.inner.complete(messages, params)
            out.answer(
                prompt_tokens=result.prompt_tokens, completion_tokens=result.completion_tokens
            )
            return result

    async def score_choices(
        self, messages: Sequence[Message], *, reply_prefix: str, choices: Sequence[str]
    ) -> ChoiceScores:
        estimate = estimate_tokens([*messages, Message("assistant", reply_prefix)], 1)
        async with self.limiter.call(tokens=estimate) as out:
            result = await self.inner.score_choices(
                messages, reply_prefix=reply_prefix, choices=choices
            )
            out.answer(prompt_tokens=result.prompt_tokens, completion_tokens=1)
            return result

    async def aclose(self) -> None:
        self.limiter.close()
        await super().aclose()
