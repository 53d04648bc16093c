"""One structured judge call with the shared judge metrics (latency, tokens by task)."""

import time
from collections.abc import Callable, Sequence
from typing import TypeVar

from pydantic import BaseModel

from rubricate.common.metrics import JUDGE_LATENCY, LLM_TOKENS
from rubricate.llm.base import GenerationParams, LLMBackend, Message
from rubricate.llm.settings import LLMSettings
from rubricate.llm.structured import complete_structured, json_schema_for
from rubricate.llm.usage import Usage

T = TypeVar("T", bound=BaseModel)


async def run_structured_task(
    backend: LLMBackend,
    messages: Sequence[Message],
    *,
    output: type[T],
    task: str,
    schema_name: str,
    llm: LLMSettings,
    max_tokens: int,
    temperature: float = 0.0,
    usage: Usage,
    validate: Callable[[T], None] | None = None,
) -> T:
    """`complete_structured` plus JUDGE_LATENCY / LLM_TOKENS under `task`; tokens are
    counted even when the call fails (they were paid for)."""
    params = GenerationParams(
        temperature=temperature,
        max_tokens=max_tokens,
        json_schema=json_schema_for(output),
        schema_name=schema_name,
    )
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
        )
    finally:
        JUDGE_LATENCY.labels(task, "all", backend.name).observe(time.perf_counter() - started)
        LLM_TOKENS.labels(task, backend.name, "prompt").inc(usage.prompt_tokens - before_prompt)
        LLM_TOKENS.labels(task, backend.name, "completion").inc(
            usage.completion_tokens - before_completion
        )
