"""Token and latency accounting; recorded even when a call's output fails to parse."""

from dataclasses import dataclass
from typing import Protocol

from rubricate_client.schemas.common import UsageOut


class UsageLike(Protocol):
    @property
    def calls(self) -> int: ...
    @property
    def prompt_tokens(self) -> int: ...
    @property
    def completion_tokens(self) -> int: ...
    @property
    def latency_s(self) -> float: ...


@dataclass
class Usage:
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0

    def record(self, *, prompt_tokens: int, completion_tokens: int, latency_s: float) -> None:
        self.calls += 1
        self.prompt_tokens += prompt_tokens
        self.completion_tokens += completion_tokens
        self.latency_s += latency_s

    def merge(self, other: UsageLike) -> None:
        """Add another account: a `Usage`, or the `UsageOut` a service reported."""
        self.calls += other.calls
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.latency_s += other.latency_s


def usage_out(usage: Usage) -> UsageOut:
    """The wire form of an account (latency rounded to 0.1 ms)."""
    return UsageOut(
        calls=usage.calls,
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        latency_s=round(usage.latency_s, 4),
    )
