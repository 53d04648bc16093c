"""One `score_choices` call as the judge tasks make it: transport failures retried with
backoff, every choice checked to have a finite log-probability, the usage recorded (and
merged into the error when the call finally fails, so a failure still reports its cost)."""

import logging
import math
from collections.abc import Sequence
from dataclasses import replace

from rubricate.common.metrics import LLM_RETRIES
from rubricate.llm.base import ChoiceScores, LLMBackend, Message
from rubricate.llm.errors import BackendRequestError, LLMError, TransportError
from rubricate.llm.retry import call_with_retries
from rubricate.llm.settings import LLMSettings
from rubricate.llm.usage import Usage

log = logging.getLogger("rubricate.llm")


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
    def on_retry(n: int, exc: TransportError, delay: float) -> None:
        LLM_RETRIES.labels(task, "transport").inc()
        log.warning(
            "llm.retry task=%s backend=%s retry=%d delay_s=%.2f error=%s",
            task,
            backend.name,
            n,
            delay,
            exc,
        )

    try:
        scores = await call_with_retries(
            lambda: backend.score_choices(messages, reply_prefix=reply_prefix, choices=choices),
            max_retries=llm.max_retries,
            base_s=llm.backoff_base_s,
            max_s=llm.backoff_max_s,
            on_retry=on_retry,
        )
    except LLMError as exc:
        usage.merge(exc.usage)
        exc.usage = replace(usage)
        raise
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
