"""Fake backends for unit-testing orchestration and measuring overhead. They judge nothing.

`FakeBackend` answers from a script (a queue of replies, or a function of the request) and
records every call. `InstantFakeBackend` answers at once with the smallest JSON value that
validates against the request's schema.
"""

import json
import math
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from rubricate.llm.base import Completion, GenerationParams, LLMBackend, Message

Reply = str | BaseException
Script = Callable[[Sequence[Message], GenerationParams], Reply]


class FakeBackend(LLMBackend):
    """Replies in order from `script` (raising the exceptions in it), or from `script(...)`."""

    name = "fake"

    def __init__(
        self,
        script: Iterable[Reply] | Script = (),
        *,
        model: str = "fake-model",
        prompt_tokens: int = 10,
        completion_tokens: int = 5,
        latency_s: float = 0.0,
        finish_reason: str = "stop",
    ) -> None:
        self.model = model
        self._script: Script | None = script if callable(script) else None
        self._queue: deque[Reply] = deque() if callable(script) else deque(script)
        self.prompt_tokens = prompt_tokens
        self.completion_tokens = completion_tokens
        self.latency_s = latency_s
        self.finish_reason = finish_reason
        self.calls: list[tuple[tuple[Message, ...], GenerationParams]] = []
        self.closed = False

    def push(self, *replies: Reply) -> None:
        self._queue.extend(replies)

    async def complete(self, messages: Sequence[Message], params: GenerationParams) -> Completion:
        self.calls.append((tuple(messages), params))
        if self._script is not None:
            reply = self._script(messages, params)
        elif self._queue:
            reply = self._queue.popleft()
        else:
            raise AssertionError(f"FakeBackend: no scripted reply left for call {len(self.calls)}")
        if isinstance(reply, BaseException):
            raise reply
        return Completion(
            text=reply,
            prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens,
            latency_s=self.latency_s,
            model=self.model,
            backend=self.name,
            finish_reason=self.finish_reason,
        )

    async def aclose(self) -> None:
        self.closed = True


class InstantFakeBackend(LLMBackend):
    """Answers instantly with a minimal instance of the requested schema (`{}` without one)."""

    name = "instant-fake"

    def __init__(self, *, prompt_tokens: int = 10, completion_tokens: int = 5) -> None:
        self.model = "instant-fake"
        self.prompt_tokens = prompt_tokens
        self.completion_tokens = completion_tokens
        self.calls = 0
        self._cache: dict[str, str] = {}

    async def complete(self, messages: Sequence[Message], params: GenerationParams) -> Completion:
        self.calls += 1
        text = "{}"
        if params.json_schema is not None:
            key = json.dumps(params.json_schema, sort_keys=True)
            if key not in self._cache:
                self._cache[key] = json.dumps(minimal_instance(params.json_schema))
            text = self._cache[key]
        return Completion(
            text=text,
            prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens,
            latency_s=0.0,
            model=self.model,
            backend=self.name,
            finish_reason="stop",
        )


def minimal_instance(schema: dict[str, Any]) -> Any:
    """A small value valid under `schema`: required properties only, `minItems` items,
    numbers at their minimum, strings of `minLength` "x"s, the first enum value."""
    defs: dict[str, Any] = schema.get("$defs", {}) | schema.get("definitions", {})
    return _instance(schema, defs, depth=0)


def _instance(schema: dict[str, Any], defs: dict[str, Any], depth: int) -> Any:
    if depth > 32:
        raise ValueError("schema nests too deeply for a minimal instance")
    ref = schema.get("$ref")
    if isinstance(ref, str):
        return _instance(defs[ref.rsplit("/", 1)[-1]], defs, depth + 1)
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][0]
    for key in ("anyOf", "oneOf"):
        if key in schema:
            options = schema[key]
            chosen = next((o for o in options if o.get("type") != "null"), options[0])
            return _instance(chosen, defs, depth + 1)
    if "allOf" in schema:
        merged: dict[str, Any] = {}
        for part in schema["allOf"]:
            value = _instance(part, defs, depth + 1)
            if isinstance(value, dict):
                merged.update(value)
        return merged
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or (kind is None and "properties" in schema):
        properties: dict[str, Any] = schema.get("properties", {})
        return {
            name: _instance(properties.get(name, {}), defs, depth + 1)
            for name in schema.get("required", [])
        }
    if kind == "array":
        if "prefixItems" in schema:
            return [_instance(item, defs, depth + 1) for item in schema["prefixItems"]]
        items = schema.get("items", {})
        return [_instance(items, defs, depth + 1) for _ in range(schema.get("minItems", 0))]
    if kind == "string":
        if schema.get("format") in _FORMATTED:
            return _FORMATTED[schema["format"]]
        return "x" * max(1, schema.get("minLength", 1)) if schema.get("maxLength") != 0 else ""
    if kind in ("integer", "number"):
        return _number(schema, integer=kind == "integer")
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    return {}


def _number(schema: dict[str, Any], *, integer: bool) -> int | float:
    value: float = 0
    if "minimum" in schema:
        value = schema["minimum"]
    elif "exclusiveMinimum" in schema:
        value = schema["exclusiveMinimum"] + (1 if integer else 1e-6)
    if "maximum" in schema and value > schema["maximum"]:
        value = schema["maximum"]
    elif "exclusiveMaximum" in schema and value >= schema["exclusiveMaximum"]:
        value = schema["exclusiveMaximum"] - (1 if integer else 1e-6)
    return math.ceil(value) if integer else value


_FORMATTED = {
    "date-time": "2000-01-01T00:00:00Z",
    "date": "2000-01-01",
    "time": "00:00:00",
    "duration": "P1D",
    "uuid": "00000000-0000-0000-0000-000000000000",
    "email": "x@example.com",
    "uri": "https://example.com/",
}
