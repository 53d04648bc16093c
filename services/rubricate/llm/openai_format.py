"""The OpenAI chat-completion shape, spoken by HTTP servers and by llama-cpp-python alike."""

from collections.abc import Sequence
from typing import Any

from rubricate.llm.base import Completion, Message, TokenLogprob


def chat_messages(messages: Sequence[Message]) -> list[dict[str, str]]:
    return [{"role": m.role, "content": m.content} for m in messages]


def completion_from_response(
    response: dict[str, Any], *, latency_s: float, model: str, backend: str
) -> Completion:
    """Raises KeyError, IndexError, TypeError or ValueError when `response` is malformed."""
    choice = response["choices"][0]
    usage = response.get("usage") or {}
    content = choice["message"].get("content")
    if content is not None and not isinstance(content, str):
        raise TypeError(f"message content is {type(content).__name__}, not a string")
    return Completion(
        text=content or "",
        prompt_tokens=int(usage.get("prompt_tokens") or 0),
        completion_tokens=int(usage.get("completion_tokens") or 0),
        latency_s=latency_s,
        model=model,
        backend=backend,
        finish_reason=choice.get("finish_reason"),
        logprobs=chat_logprobs(choice.get("logprobs")),
    )


def chat_logprobs(logprobs: dict[str, Any] | None) -> tuple[TokenLogprob, ...] | None:
    """`{"content": [{token, logprob, top_logprobs: [{token, logprob}]}]}` as TokenLogprobs."""
    if not logprobs or logprobs.get("content") is None:
        return None
    return tuple(
        TokenLogprob(
            token=item["token"],
            logprob=float(item["logprob"]),
            top={t["token"]: float(t["logprob"]) for t in item.get("top_logprobs") or []},
        )
        for item in logprobs["content"]
    )
