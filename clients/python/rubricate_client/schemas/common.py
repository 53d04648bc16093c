"""Wire models every capability's responses share."""

from pydantic import BaseModel


class UsageOut(BaseModel):
    """LLM work spent on a request: calls, tokens, and time spent waiting on the model."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
