"""A structured judge call with a caller-built schema, recorded in the shared judge metrics.

Like `complete_structured`, plus JUDGE_LATENCY and LLM_TOKENS under `task` (tokens counted
even when the call fails: they were paid for). The step tasks narrow their schemas per call
(exactly k criteria, the labels of one slate), so they build `params` themselves.
"""

import time
from collections.abc import Callable, Sequence
from typing import TypeVar

from pydantic import BaseModel

from rubricate.common.metrics import JUDGE_LATENCY, LLM_TOKENS
from rubricate.common.usage import Usage
from rubricate.llm.base import GenerationParams, LLMBackend, Message
from rubricate.llm.retry import ensure_time_left, sleep_within_deadline
from rubricate.llm.settings import LLMSettings
from rubricate.llm.structured import complete_structured

T = TypeVar("T", bound=BaseModel)


async def judge_call(
    backend: LLMBackend,
    messages: Sequence[Message],
    *,
    output: type[T],
    params: GenerationParams,
    task: str,
    llm: LLMSettings,
    usage: Usage,
    validate: Callable[[T], None] | None = None,
    stage: str = "all",
) -> T:
    ensure_time_left(task)
    before_prompt, before_completion = usage.prompt_tokens, usage.completion_tokens
    started = time.perf_counter()
    try:
        return await complete_structured(
            backend,
            messages,
            output=output,
            params=params,
            usage=usage,
            task=task,
            validate=validate,
            max_retries=llm.max_retries,
            backoff_base_s=llm.backoff_base_s,
            backoff_max_s=llm.backoff_max_s,
            sleep=sleep_within_deadline,
        )
    finally:
        JUDGE_LATENCY.labels(task, stage, backend.name).observe(time.perf_counter() - started)
        LLM_TOKENS.labels(task, backend.name, "prompt").inc(usage.prompt_tokens - before_prompt)
        LLM_TOKENS.labels(task, backend.name, "completion").inc(
            usage.completion_tokens - before_completion
        )
