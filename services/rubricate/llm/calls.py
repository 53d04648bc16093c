"""The judge calls the tasks make, the upper of the LLM layer's two call layers (a task
service calls one of these; each calls the lower layer, the one retry loop
`llm.retry.call_with_retries`, directly). Every model call records its tokens and latency in
the request's usage and, on a final failure, carries that usage with the failed attempts
merged in.

- `complete_structured`: a Pydantic model in, a validated instance out. The schema
  constrains decoding where the backend can (`llm.structured.json_schema_for`); parsing
  stays tolerant anyway (`llm.structured.parse_json_output`). An output that fails to parse
  or validate gets exactly one repair call that quotes the error (`repaired`); after that
  the task fails with `OutputParseError`. Recorded in the judge metrics under its task
  (`judge_metrics`: latency, and tokens counted even when the call fails: they were paid for).
- `scored_choices`: one `score_choices` pass, every choice checked to have a finite
  log-probability.
- `complete`: one plain completion, for tasks that parse and repair replies themselves
  (`repaired` with their own acceptance and repair message).

`complete_structured` and `scored_choices` start no call once the request's deadline has
passed (`DeadlineExceeded`); a `complete` caller checks (`llm.retry.ensure_time_left`). The
retry policy is passed as keyword arguments (a task service passes `**self.retry`,
`llm.retry.retry_args`).
"""

import asyncio
import logging
import math
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import TypeVar

from pydantic import BaseModel

from rubricate.common.metrics import JUDGE_LATENCY, LLM_RETRIES, LLM_TOKENS, PARSE_FAILURES
from rubricate.common.usage import Usage
from rubricate.llm.base import ChoiceScores, Completion, GenerationParams, LLMBackend, Message
from rubricate.llm.errors import BackendRequestError, OutputParseError
from rubricate.llm.retry import (
    RetryArgs,
    Sleep,
    call_with_retries,
    ensure_time_left,
    retry_logger,
)
from rubricate.llm.structured import json_schema_for, parse_json_output

log = logging.getLogger("rubricate.llm.calls")

T = TypeVar("T", bound=BaseModel)
R = TypeVar("R")

REPAIR_PROMPT = (
    "Your previous reply could not be used: {reason}\n"
    "Reply again with only the corrected JSON (no explanations, no code fences), "
    "following the required format exactly."
)


async def gather_or_cancel(calls: Iterable[Awaitable[R]]) -> list[R]:
    """Await a request's `calls` concurrently, results in order; the first failure cancels
    the others (a failed request leaves no judge call running)."""
    tasks = [asyncio.ensure_future(call) for call in calls]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


@contextmanager
def judge_metrics(
    task: str, stage: str, backend: str, usage: Usage, *, completion_tokens: bool = True
) -> Iterator[None]:
    """Record the judge work done inside the block: its latency (JUDGE_LATENCY under
    `task`, `stage`, `backend`) and the tokens it added to `usage` (LLM_TOKENS; the
    completion tokens unless `completion_tokens=False`), failed or not."""
    before_prompt, before_completion = usage.prompt_tokens, usage.completion_tokens
    started = time.perf_counter()
    try:
        yield
    finally:
        JUDGE_LATENCY.labels(task, stage, backend).observe(time.perf_counter() - started)
        LLM_TOKENS.labels(task, backend, "prompt").inc(usage.prompt_tokens - before_prompt)
        if completion_tokens:
            LLM_TOKENS.labels(task, backend, "completion").inc(
                usage.completion_tokens - before_completion
            )


async def _retry(
    backend: LLMBackend,
    task: str,
    usage: Usage,
    policy: RetryArgs,
    call: Callable[[], Awaitable[R]],
) -> R:
    """`call()` under the one retry loop (`call_with_retries`) with `policy`, its retries
    logged under `task` and `backend`."""
    return await call_with_retries(
        call,
        max_retries=policy["max_retries"],
        base_s=policy["backoff_base_s"],
        max_s=policy["backoff_max_s"],
        on_retry=retry_logger(task, backend.name, policy["max_retries"]),
        sleep=policy["sleep"],
        usage=usage,
    )


async def complete(
    backend: LLMBackend,
    messages: Sequence[Message],
    params: GenerationParams,
    *,
    task: str,
    usage: Usage,
    max_retries: int = 5,
    backoff_base_s: float = 0.5,
    backoff_max_s: float = 20.0,
    sleep: Sleep = asyncio.sleep,
) -> Completion:
    """One completion of `messages`, its tokens and latency recorded in `usage`. The
    caller checks the deadline (`ensure_time_left`) where a call must not start late."""
    policy = RetryArgs(
        max_retries=max_retries,
        backoff_base_s=backoff_base_s,
        backoff_max_s=backoff_max_s,
        sleep=sleep,
    )
    completion = await _retry(
        backend, task, usage, policy, lambda: backend.complete(messages, params)
    )
    usage.record(
        prompt_tokens=completion.prompt_tokens,
        completion_tokens=completion.completion_tokens,
        latency_s=completion.latency_s,
    )
    return completion


async def scored_choices(
    backend: LLMBackend,
    messages: Sequence[Message],
    *,
    reply_prefix: str,
    choices: Sequence[str],
    task: str,
    usage: Usage,
    max_retries: int = 5,
    backoff_base_s: float = 0.5,
    backoff_max_s: float = 20.0,
    sleep: Sleep = asyncio.sleep,
) -> ChoiceScores:
    """The log-probability of each of `choices` after `reply_prefix`, its prompt tokens and
    latency recorded in `usage`; `BackendRequestError` unless every choice got a finite one."""
    ensure_time_left(task)
    policy = RetryArgs(
        max_retries=max_retries,
        backoff_base_s=backoff_base_s,
        backoff_max_s=backoff_max_s,
        sleep=sleep,
    )
    scores = await _retry(
        backend,
        task,
        usage,
        policy,
        lambda: backend.score_choices(messages, reply_prefix=reply_prefix, choices=choices),
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


class Rejected(Exception):
    """A reply that cannot be used, and why (quoted in the repair call)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


async def repaired(
    call: Callable[[Sequence[Message]], Awaitable[Completion]],
    messages: Sequence[Message],
    *,
    accept: Callable[[Completion, bool], R],
    repair: Callable[[str], Message],
    task: str,
    backend: str,
    usage: Usage,
    failure: str,
) -> R:
    """`accept(call(messages), False)`; if that raises `Rejected`, exactly one repair call
    (the conversation, the rejected reply, and `repair(reason)`) and `accept(reply, True)`.
    A second rejection raises `OutputParseError` ("`failure` after a repair retry: ...")
    with the raw reply and a snapshot of `usage`. Repairs and failures are counted under
    `task`."""
    first = await call(messages)
    try:
        return accept(first, False)
    except Rejected as rejected:
        reason = rejected.reason
    LLM_RETRIES.labels(task, "repair").inc()
    log.warning("llm.repair task=%s backend=%s reason=%s", task, backend, reason)
    second = await call([*messages, Message("assistant", first.text), repair(reason)])
    try:
        return accept(second, True)
    except Rejected as rejected:
        PARSE_FAILURES.labels(task).inc()
        raise OutputParseError(
            f"{failure} after a repair retry: {rejected.reason}",
            raw=second.text,
            usage=replace(usage),
        ) from None


async def complete_structured(
    backend: LLMBackend,
    messages: Sequence[Message],
    *,
    output: type[T],
    params: GenerationParams,
    usage: Usage,
    task: str,
    validate: Callable[[T], None] | None = None,
    stage: str = "all",
    max_retries: int = 5,
    backoff_base_s: float = 0.5,
    backoff_max_s: float = 20.0,
    sleep: Sleep = asyncio.sleep,
) -> T:
    """Ask `backend` for JSON matching `output` (under `params.json_schema`, else the schema
    of `output`), with one repair call on invalid output (`repaired`).

    `validate` may raise ValueError for semantic problems (e.g. a wrong number of items);
    that counts as invalid output. Every call's tokens and latency go into `usage`; any
    `LLMError` raised carries a snapshot of it. Recorded in the judge metrics under `task`
    and `stage`.
    """
    ensure_time_left(task)
    if params.json_schema is None:
        params = replace(params, json_schema=json_schema_for(output))

    def accept(completion: Completion, _repair: bool) -> T:
        try:
            value = parse_json_output(completion.text, output)
            if validate is not None:
                validate(value)
        except (OutputParseError, ValueError) as exc:
            reason = str(exc)
            if completion.finish_reason == "length":
                reason += (
                    f"\n(the reply was cut off at the {params.max_tokens}-token limit: be concise)"
                )
            raise Rejected(reason) from exc
        return value

    with judge_metrics(task, stage, backend.name, usage):
        return await repaired(
            lambda conversation: complete(
                backend,
                conversation,
                params,
                task=task,
                usage=usage,
                max_retries=max_retries,
                backoff_base_s=backoff_base_s,
                backoff_max_s=backoff_max_s,
                sleep=sleep,
            ),
            messages,
            accept=accept,
            repair=lambda reason: Message("user", REPAIR_PROMPT.format(reason=reason)),
            task=task,
            backend=backend.name,
            usage=usage,
            failure=f"{task}: invalid output",
        )
