"""One `score_choices` call as the judge tasks make it: transport failures retried with
backoff, every choice checked to have a finite log-probability, the usage recorded (and
merged into the error when the call finally fails, so a failure still reports its cost).
No call is started once the request's deadline has passed (`DeadlineExceeded`)."""

import math
from collections.abc import Sequence

from rubricate.common.usage import Usage
from rubricate.llm.base import ChoiceScores, LLMBackend, Message
from rubricate.llm.errors import BackendRequestError
from rubricate.llm.retry import ensure_time_left, retried
from rubricate.llm.settings import LLMSettings


async def scored_choices(
    backend: LLMBackend,
    messages: Sequence[Message],
    *,
    reply_prefix: str,
    choices: Sequence[str],
    task: str,
    llm: LLMSettings,
    usage: Usage,
) -> ChoiceScores:
    ensure_time_left(task)
    scores = await retried(
        lambda: backend.score_choices(messages, reply_prefix=reply_prefix, choices=choices),
        task=task,
        backend=backend.name,
        llm=llm,
        usage=usage,
    )
    if set(scores.logprobs) != set(choices) or not all(
        math.isfinite(v) for v in scores.logprobs.values()
    ):
        raise BackendRequestError(
            f"{task}: the backend scored {sorted(scores.logprobs)} for {list(choices)}"
        )
    usage.record(
        prompt_tokens=scores.prompt_tokens, completion_tokens=0, latency_s=scores.latency_s
    )
    return scores
