"""The arithmetic of the judge-call limit and of the per-minute budgets: pure, no clock and no
I/O of its own (`llm.limiter` feeds it the times and the outcomes).

`AdaptiveLimit` (AIMD, with a slow start):

- it grows only while the limit is what holds calls back (as many calls in flight or waiting
  as the limit allows): by one call per answered call until the first back-off (the limit
  doubles every round trip: a vLLM server taking hundreds is reached in a few round trips),
  then by about the limit's square root per round trip;
- until that first back-off it also doubles every `probe_s` (1 s) that calls wait for a
  place (`probe`): a round trip is a whole judge call, and with calls of ten seconds or more
  (rubric generation) the answers alone would leave the server idle for several of them at
  the start of every run, with calls queued here; an overloaded server answers with the
  429s, 5xx and latency rises that end the slow start;
- it backs off on overload, halving on a 429, a 5xx or a call that got no answer, and by a
  tenth on a latency rise: the recent latency of one kind of call (one-token choice passes,
  or generated score sheets per token generated) at `latency_rise` times its long-run mean;
- one back-off per round trip: the calls that were already in flight when it backed off
  report the same overload and do not halve it again (each call carries the `epoch` it was
  admitted in);
- floor and ceiling bound it; floor = ceiling is a fixed limit.

`RateWindow`: at most `budget` units (requests, or tokens) started in any `window_s`
seconds, a sliding window of what was started.
"""

import math
from collections import deque
from dataclasses import dataclass
from typing import Literal

Overload = Literal["rate_limited", "server_error", "transport", "latency"]

_SHORT_ALPHA = 0.1
"""Weight of a sample in the recent latency (about the last 10 calls of a kind)."""
_LONG_ALPHA = 0.01
"""Weight of a sample in the long-run latency (about the last 100 calls of a kind)."""
_WARM_SAMPLES = 20
"""Calls of a kind before its latency can count as risen."""


@dataclass(frozen=True)
class LimitConfig:
    start: int
    floor: int
    ceiling: int
    backoff: float = 0.5
    """Multiplier on a 429, a 5xx or a call the server did not answer."""
    latency_backoff: float = 0.9
    """Multiplier on a latency rise."""
    latency_rise: float = 2.0
    probe_s: float = 1.0
    """During the slow start: the limit doubles every this long that calls wait for it."""

    def __post_init__(self) -> None:
        if not 1 <= self.floor <= self.start <= self.ceiling:
            raise ValueError("the limit needs 1 <= floor <= start <= ceiling")
        if not (0 < self.backoff < 1 and 0 < self.latency_backoff < 1 and self.latency_rise > 1):
            raise ValueError("back-off multipliers within (0, 1) and latency_rise > 1")
        if self.probe_s <= 0:
            raise ValueError("probe_s must be > 0")

    @property
    def fixed(self) -> bool:
        return self.floor == self.ceiling


@dataclass
class _Latency:
    short: float = 0.0
    long: float = 0.0
    samples: int = 0

    def add(self, value: float) -> None:
        if self.samples == 0:
            self.short = self.long = value
        else:
            self.short += _SHORT_ALPHA * (value - self.short)
            self.long += _LONG_ALPHA * (value - self.long)
        self.samples += 1

    def risen(self, factor: float) -> bool:
        return self.samples >= _WARM_SAMPLES and self.short > factor * self.long > 0

    def settle(self) -> None:
        """After a back-off: the recent figure restarts from the long-run one, so one rise
        is one back-off and the next needs new slow answers."""
        self.short = self.long


class AdaptiveLimit:
    def __init__(self, config: LimitConfig) -> None:
        self.config = config
        self._value = float(config.start)
        self._slow_start = not config.fixed
        self._probed_at: float | None = None
        self.epoch = 0
        """Raised by every back-off; a call admitted in an older epoch cannot back off."""
        self._latency: dict[bool, _Latency] = {False: _Latency(), True: _Latency()}

    @property
    def limit(self) -> int:
        return int(self._value)

    def on_success(
        self, *, latency_s: float, completion_tokens: int, saturated: bool, epoch: int
    ) -> Overload | None:
        """An answered call: grow (when `saturated`: the limit was what held calls back), or
        back off when its kind's latency has risen. Returns `latency` when it backed off."""
        if self.config.fixed:
            return None
        generated = completion_tokens > 1
        kind = self._latency[generated]
        kind.add(latency_s / completion_tokens if generated else latency_s)
        if kind.risen(self.config.latency_rise):
            kind.settle()
            if self._back_off(self.config.latency_backoff, epoch):
                return "latency"
            return None
        if saturated:
            step = 1.0 if self._slow_start else max(1.0, math.sqrt(self._value)) / self._value
            self._value = min(float(self.config.ceiling), self._value + step)
        return None

    def probe(self, now: float) -> float | None:
        """Calls are waiting for a place at `now`. In the slow start, double the limit when
        `probe_s` has passed since the waiting began or since the last doubling. Returns when
        to look again (None: never, the slow start is over or the ceiling reached)."""
        if not self._slow_start or self._value >= self.config.ceiling:
            return None
        if self._probed_at is None:
            self._probed_at = now
        elif now - self._probed_at >= self.config.probe_s:
            self._value = min(float(self.config.ceiling), self._value * 2)
            self._probed_at = now
        return self._probed_at + self.config.probe_s

    def settled(self) -> None:
        """Nothing waits for a place any more: the next wait starts a new probe period."""
        self._probed_at = None

    def on_overload(self, kind: Overload, *, epoch: int) -> bool:
        """A call the server refused (429, 5xx) or did not answer: halve, once per epoch.
        True when the limit backed off."""
        if self.config.fixed:
            return False
        return self._back_off(self.config.backoff, epoch)

    def _back_off(self, factor: float, epoch: int) -> bool:
        if epoch < self.epoch:
            return False  # admitted before the last back-off: the same overload
        self._slow_start = False
        self._value = max(float(self.config.floor), self._value * factor)
        self.epoch += 1
        return True


class RateWindow:
    """At most `budget` units started in any `window_s` seconds. A single start larger than
    the whole budget is let through alone (once nothing else is in the window), so it cannot
    wait forever."""

    def __init__(self, budget: int, *, window_s: float = 60.0) -> None:
        if budget < 1 or window_s <= 0:
            raise ValueError("budget must be >= 1 and window_s > 0")
        self.budget = budget
        self.window_s = window_s
        self._starts: deque[list[float]] = deque()  # [time, amount]
        self._used = 0.0

    def _expire(self, now: float) -> None:
        while self._starts and self._starts[0][0] <= now - self.window_s:
            self._used -= self._starts.popleft()[1]

    def used(self, now: float) -> float:
        self._expire(now)
        return self._used

    def wait_s(self, amount: float, now: float) -> float:
        """0 when `amount` fits now, else the seconds until it does (assuming nothing else
        starts meanwhile)."""
        self._expire(now)
        if not self._starts or self._used + amount <= self.budget:
            return 0.0
        freed = 0.0
        for when, size in self._starts:
            freed += size
            left = self._used - freed
            if left <= 0 or left + amount <= self.budget:
                return max(0.0, when + self.window_s - now)
        raise AssertionError("unreachable: everything in the window frees by its end")

    def take(self, amount: float, now: float) -> list[float]:
        """Record a start; the entry returned may be `settle`d with the real amount."""
        self._expire(now)
        entry = [now, float(amount)]
        self._starts.append(entry)
        self._used += amount
        return entry

    def settle(self, entry: list[float], amount: float, now: float) -> None:
        """Replace a start's estimate with what it really used (if still in the window)."""
        self._expire(now)
        if entry[0] > now - self.window_s:  # else it expired, with its amount
            self._used += amount - entry[1]
            entry[1] = float(amount)
