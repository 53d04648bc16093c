"""Structured output: a Pydantic model in, a validated instance out.

The schema constrains decoding where the backend can (llama.cpp grammar, vLLM guided
decoding, `response_format` over HTTP); parsing stays tolerant anyway (fences, prose around
the JSON, trailing commas) because not every server enforces it. An output that fails to
parse or validate gets exactly one repair call that quotes the error; after that the task
fails with `OutputParseError`. Usage is recorded for every call, failed ones included.
"""

import asyncio
import json
import logging
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from rubricate.common.metrics import LLM_RETRIES, PARSE_FAILURES
from rubricate.common.usage import Usage
from rubricate.llm.base import Completion, GenerationParams, LLMBackend, Message
from rubricate.llm.errors import LLMError, OutputParseError, TransportError
from rubricate.llm.retry import Sleep, call_with_retries

T = TypeVar("T", bound=BaseModel)

log = logging.getLogger("rubricate.llm.structured")

REPAIR_PROMPT = (
    "Your previous reply could not be used: {reason}\n"
    "Reply again with only the corrected JSON (no explanations, no code fences), "
    "following the required format exactly."
)

_MAX_ERRORS_SHOWN = 8


# --- schema -------------------------------------------------------------------------------


class _RecursiveSchema(Exception):
    pass


def json_schema_for(model_cls: type[BaseModel]) -> dict[str, Any]:
    """The schema to generate `model_cls` under: its JSON schema with local `$ref`s inlined
    (recursive ones keep `$defs`) and every declared property required.

    Requiring every property makes constrained decoders emit all fields in declaration order:
    llama.cpp's grammar puts optional properties after the required ones, which would put a
    defaulted `justification` after the `score` it should justify (OpenAI's strict mode also
    wants every property required). Parsing still validates against the model itself, so
    defaults apply when a server does not enforce the schema. Inlining keeps the schema
    portable to converters that resolve refs poorly or ignore a ref's sibling keys.
    """
    schema = model_cls.model_json_schema()
    defs: dict[str, Any] = schema.get("$defs", {})

    def inline(node: Any, seen: frozenset[str]) -> Any:
        if isinstance(node, list):
            return [inline(item, seen) for item in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            name = ref.removeprefix("#/$defs/")
            if name in seen or name not in defs:
                raise _RecursiveSchema(name)
            target = inline(defs[name], seen | {name})
            siblings = {k: inline(v, seen) for k, v in node.items() if k != "$ref"}
            return {**target, **siblings}
        all_of = node.get("allOf")
        if isinstance(all_of, list) and len(all_of) == 1 and len(node) > 1:
            siblings = {k: inline(v, seen) for k, v in node.items() if k != "allOf"}
            return {**inline(all_of[0], seen), **siblings}
        return {k: inline(v, seen) for k, v in node.items() if k != "$defs"}

    try:
        return _require_all(inline(schema, frozenset()))
    except _RecursiveSchema:
        pass
    root_ref = schema.get("$ref")
    if isinstance(root_ref, str) and root_ref.removeprefix("#/$defs/") in defs:
        # a self-referencing root is only a `$ref`; llama.cpp's converter then never
        # resolves the refs inside `$defs`, so the root gets its definition's body
        schema = {**defs[root_ref.removeprefix("#/$defs/")], "$defs": defs}
    return _require_all(schema)


def _require_all(node: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = _require_all_in(node)
    return out


def _require_all_in(node: Any) -> Any:
    if isinstance(node, list):
        return [_require_all_in(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {k: _require_all_in(v) for k, v in node.items()}
    properties = node.get("properties")
    if isinstance(properties, dict) and node.get("type", "object") == "object":
        out["required"] = list(properties)
    return out


# --- tolerant parsing ---------------------------------------------------------------------

_FENCE = re.compile(r"```[ \t]*[A-Za-z0-9_-]*[ \t]*\r?\n(.*?)(?:```|\Z)", re.S)


def _closing_index(text: str, start: int) -> int | None:
    """Index of the bracket closing the one at `start`, skipping strings; None if cut off."""
    depth = 0
    in_string = False
    escaped = False
    for i in range(start, len(text)):
        c = text[i]
        if in_string:
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
        elif c in "{[":
            depth += 1
        elif c in "}]":
            depth -= 1
            if depth == 0:
                return i
    return None


def _top_level_spans(text: str) -> Iterator[tuple[str, bool]]:
    """Outermost bracketed spans, left to right, as (span, complete)."""
    i = 0
    while i < len(text):
        if text[i] in "{[":
            end = _closing_index(text, i)
            if end is None:
                yield text[i:], False
                return
            yield text[i : end + 1], True
            i = end + 1
        else:
            i += 1


def _drop_trailing_commas(span: str) -> str:
    out: list[str] = []
    in_string = False
    escaped = False
    for i, c in enumerate(span):
        if in_string:
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
        elif c == ",":
            rest = span[i + 1 :].lstrip()
            if rest[:1] in ("}", "]"):
                continue
        out.append(c)
    return "".join(out)


def _loads(span: str) -> Any:
    try:
        return json.loads(span)
    except json.JSONDecodeError:
        return json.loads(_drop_trailing_commas(span))


def describe_validation_error(exc: ValidationError) -> str:
    errors = exc.errors(include_url=False)
    lines = []
    for err in errors[:_MAX_ERRORS_SHOWN]:
        where = ".".join(str(p) for p in err["loc"]) or "(top level)"
        got = json.dumps(err.get("input"), default=str)
        if len(got) > 60:
            got = got[:57] + "..."
        lines.append(f"- {where}: {err['msg']} (got {got})")
    if len(errors) > _MAX_ERRORS_SHOWN:
        lines.append(f"- … and {len(errors) - _MAX_ERRORS_SHOWN} more errors")
    return "the JSON does not match the required format:\n" + "\n".join(lines)


def parse_json_output(text: str, model_cls: type[T]) -> T:
    """The first JSON object/array in `text` that validates as `model_cls`.

    Looks inside code fences first, then the whole text; tolerates prose around the JSON and
    trailing commas. Raises `OutputParseError` describing the first problem found.
    """
    sources = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    first_problem: str | None = None
    seen: set[str] = set()
    for source in sources:
        for span, complete in _top_level_spans(source):
            if span in seen:
                continue
            seen.add(span)
            if not complete:
                first_problem = first_problem or "the JSON is cut off before its end"
                continue
            try:
                data = _loads(span)
            except json.JSONDecodeError as exc:
                first_problem = first_problem or f"invalid JSON: {exc}"
                continue
            try:
                return model_cls.model_validate(data)
            except ValidationError as exc:
                first_problem = first_problem or describe_validation_error(exc)
    raise OutputParseError(first_problem or "no JSON object or array found in the reply", raw=text)


# --- the structured call ------------------------------------------------------------------


class _Rejected(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _accept(
    completion: Completion,
    output: type[T],
    validate: Callable[[T], None] | None,
    params: GenerationParams,
) -> T:
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
        raise _Rejected(reason) from exc
    return value


async def complete_structured(
    backend: LLMBackend,
    messages: Sequence[Message],
    *,
    output: type[T],
    params: GenerationParams,
    usage: Usage,
    task: str,
    validate: Callable[[T], None] | None = None,
    max_retries: int = 5,
    backoff_base_s: float = 0.5,
    backoff_max_s: float = 20.0,
    sleep: Sleep = asyncio.sleep,
) -> T:
    """Ask `backend` for JSON matching `output`, with one repair call on invalid output.

    `validate` may raise ValueError for semantic problems (e.g. a wrong number of items);
    that counts as invalid output. Transport failures are retried with backoff around each
    call. Every call's tokens and latency go into `usage`; any `LLMError` raised carries a
    snapshot of it.
    """
    if params.json_schema is None:
        params = replace(params, json_schema=json_schema_for(output))

    def on_retry(n: int, exc: TransportError, delay: float) -> None:
        LLM_RETRIES.labels(task, "transport").inc()
        log.warning(
            "llm.retry task=%s backend=%s retry=%d/%d delay_s=%.2f error=%s",
            task,
            backend.name,
            n,
            max_retries,
            delay,
            exc,
        )

    async def call(conversation: Sequence[Message]) -> Completion:
        try:
            completion = await call_with_retries(
                lambda: backend.complete(conversation, params),
                max_retries=max_retries,
                base_s=backoff_base_s,
                max_s=backoff_max_s,
                on_retry=on_retry,
                sleep=sleep,
            )
        except LLMError as exc:
            usage.merge(exc.usage)
            exc.usage = replace(usage)
            raise
        usage.record(
            prompt_tokens=completion.prompt_tokens,
            completion_tokens=completion.completion_tokens,
            latency_s=completion.latency_s,
        )
        return completion

    first = await call(messages)
    try:
        return _accept(first, output, validate, params)
    except _Rejected as rejected:
        first_reason = rejected.reason
    LLM_RETRIES.labels(task, "repair").inc()
    log.warning("llm.repair task=%s backend=%s reason=%s", task, backend.name, first_reason)
    repair = [
        *messages,
        Message("assistant", first.text),
        Message("user", REPAIR_PROMPT.format(reason=first_reason)),
    ]
    second = await call(repair)
    try:
        return _accept(second, output, validate, params)
    except _Rejected as rejected:
        PARSE_FAILURES.labels(task).inc()
        raise OutputParseError(
            f"{task}: invalid output after a repair retry: {rejected.reason}",
            raw=second.text,
            usage=replace(usage),
        ) from None
