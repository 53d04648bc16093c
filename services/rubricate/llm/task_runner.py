"""A structured judge task whose schema is the output model's own (the mining tasks)."""

from collections.abc import Callable, Sequence
from typing import TypeVar

from pydantic import BaseModel

from rubricate.common.usage import Usage
from rubricate.llm.base import GenerationParams, LLMBackend, Message
from rubricate.llm.judge_call import judge_call
from rubricate.llm.settings import LLMSettings
from rubricate.llm.structured import json_schema_for

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
    """`judge_call` with the schema of `output`; metrics and usage as there."""
    params = GenerationParams(
        temperature=temperature,
        max_tokens=max_tokens,
        json_schema=json_schema_for(output),
        schema_name=schema_name,
    )
    return await judge_call(
        backend,
        messages,
        output=output,
        params=params,
        task=task,
        llm=llm,
        usage=usage,
        validate=validate,
    )
