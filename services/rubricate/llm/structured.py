"""Structured output, the pure part: the JSON schema to constrain decoding with, and a
tolerant parser from a reply to a validated Pydantic model.

The schema constrains decoding where the backend can (llama.cpp grammar, vLLM guided
decoding, `response_format` over HTTP); parsing stays tolerant anyway (fences, prose around
the JSON, trailing commas) because not every server enforces it. The call itself, with its
one repair, is `llm.calls.complete_structured`.
"""

import json
import re
from collections.abc import Iterator
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from rubricate.llm.errors import OutputParseError

T = TypeVar("T", bound=BaseModel)

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


def _outside_strings(text: str, start: int = 0) -> Iterator[int]:
    """Indices from `start` of the characters of `text` outside JSON strings (a string's
    quotes and content, escapes included, are skipped)."""
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
        else:
            yield i


def _closing_index(text: str, start: int) -> int | None:
    """Index of the bracket closing the one at `start`, skipping strings; None if cut off."""
    depth = 0
    for i in _outside_strings(text, start):
        if text[i] in "{[":
            depth += 1
        elif text[i] in "}]":
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
    dropped = {
        i
        for i in _outside_strings(span)
        if span[i] == "," and span[i + 1 :].lstrip()[:1] in ("}", "]")
    }
    return "".join(c for i, c in enumerate(span) if i not in dropped)


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
