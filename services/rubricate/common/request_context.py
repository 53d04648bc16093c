"""The bookkeeping of the request being served: its wait clock, its LLM usage, the headers
it forwards. One object in a contextvar, so it travels with the request (and into the tasks
it starts) instead of being passed by hand through every function on the way.

An orchestration opens one with `request_context(...)`; every `ServiceClient` call made
inside adds its wall-clock wait to `clock`, the LLM usage its answer (or failed attempt)
reports to `usage`, and sends `headers` (the tenant, the caller's identity). A call made
outside any context records nothing. The deadline travels beside it (`common.deadlines`).
"""

import contextvars
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

from rubricate.common.usage import Usage


class WaitClock:
    """Union of the wall-clock intervals a request spent waiting on upstream services."""

    def __init__(self) -> None:
        self._intervals: list[tuple[float, float]] = []

    def add(self, start: float, end: float) -> None:
        self._intervals.append((start, end))

    def total(self) -> float:
        total = 0.0
        cur_start = cur_end = None
        for start, end in sorted(self._intervals):
            if cur_end is None or start > cur_end:
                if cur_end is not None and cur_start is not None:
                    total += cur_end - cur_start
                cur_start, cur_end = start, end
            else:
                cur_end = max(cur_end, end)
        if cur_end is not None and cur_start is not None:
            total += cur_end - cur_start
        return total


@dataclass
class RequestContext:
    """What one request accounts for: time waiting upstream, LLM usage, forwarded headers."""

    clock: WaitClock = field(default_factory=WaitClock)
    usage: Usage = field(default_factory=Usage)
    headers: dict[str, str] = field(default_factory=dict)


_CONTEXT: contextvars.ContextVar[RequestContext | None] = contextvars.ContextVar(
    "rubricate_request_context", default=None
)


def current_context() -> RequestContext | None:
    """The context of the request being served, or None outside one."""
    return _CONTEXT.get()


@contextmanager
def request_context(
    *,
    usage: Usage | None = None,
    headers: Mapping[str, str] | None = None,
) -> Iterator[RequestContext]:
    """Account the block's upstream calls to a new context (its own clock; `usage` when the
    caller keeps the account itself, else a new one; `headers` sent with every call)."""
    ctx = RequestContext(usage=usage if usage is not None else Usage(), headers=dict(headers or {}))
    token = _CONTEXT.set(ctx)
    try:
        yield ctx
    finally:
        _CONTEXT.reset(token)
