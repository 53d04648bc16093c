"""Wire models shared by several services."""

from pydantic import BaseModel

from rubricate.llm.usage import Usage


class UsageOut(BaseModel):
    """LLM work spent on a request: calls, tokens, and time spent waiting on the model."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0

    @classmethod
    def of(cls, usage: Usage) -> "UsageOut":
        return cls(
            calls=usage.calls,
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            latency_s=round(usage.latency_s, 4),
        )

    def to_usage(self) -> Usage:
        return Usage(
            calls=self.calls,
            prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens,
            latency_s=self.latency_s,
        )


class TaskResponse(BaseModel):
    """What every model-server task returns besides its result."""

    usage: UsageOut
    model: str
    backend: str
