"""The ten label output formats of Search-Gen-V App. B.2 (Table 5) and a parser for them.

A verifier is asked for its labels in one format, but a reply in any of the ten is
accepted (a model trained on all of them, like Search-Gen-V, mixes them up). A reply may
open with a `<reasoning>…</reasoning>` (or `<think>`) section and sit in a code fence.
The parser returns the labels with their character offsets in the reply, so label
probabilities can be read from the token log-probabilities at those offsets.

A reply whose label count differs from the nugget count is rejected (`LabelParseError`),
never padded or truncated: the caller retries, then reports an error.
"""

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Literal

from rubricate.llm.base import TokenLogprob
from rubricate.nuggets.domain.rewards import LABELS
from rubricate_client.schemas.nuggets import Label

LabelFormat = Literal[
    "json",
    "csv",
    "python_list",
    "yaml",
    "markdown",
    "xml",
    "tsv",
    "numbered",
    "comma_space",
    "pipe",
]
FORMATS: Final[tuple[LabelFormat, ...]] = (
    "json",
    "csv",
    "python_list",
    "yaml",
    "markdown",
    "xml",
    "tsv",
    "numbered",
    "comma_space",
    "pipe",
)


def format_instruction(fmt: LabelFormat, *, n: int, labels: Sequence[Label] = LABELS) -> str:
    """How to write `n` labels in `fmt` (Table 5's descriptions, with an example)."""
    a, b = labels[0], labels[-1]
    example = [a, b, labels[1 if len(labels) > 2 else 0]][: max(1, min(n, 3))]
    what = f"exactly {n} label{'s' if n != 1 else ''}, one per nugget, in nugget order"
    if fmt == "json":
        return f"a JSON array of {what}, e.g. {json.dumps(example)}"
    if fmt == "csv":
        return f"comma-separated values without spaces, {what}, e.g. {','.join(example)}"
    if fmt == "python_list":
        return f"a Python list of {what}, e.g. {example!r}"
    if fmt == "yaml":
        return f"a YAML list of {what}, e.g.\n" + "\n".join(f"- {x}" for x in example)
    if fmt == "markdown":
        return f"a Markdown unordered list of {what}, e.g.\n" + "\n".join(f"* {x}" for x in example)
    if fmt == "xml":
        items = "".join(f"<label>{x}</label>" for x in example)
        return f"XML with {what}, e.g. <labels>{items}</labels>"
    if fmt == "tsv":
        return f"tab-separated values on one line, {what}, e.g. " + "\t".join(example)
    if fmt == "numbered":
        return f"a numbered list of {what}, e.g.\n" + "\n".join(
            f"{i}. {x}" for i, x in enumerate(example, start=1)
        )
    if fmt == "comma_space":
        return f"comma-separated values with spaces, {what}, e.g. {', '.join(example)}"
    if fmt == "pipe":
        return f"pipe-separated values, {what}, e.g. {' | '.join(example)}"
    raise ValueError(f"unknown label format {fmt!r}")


def render(labels: Sequence[str], fmt: LabelFormat) -> str:
    """`labels` written in `fmt`: what a well-behaved verifier replies (used by fakes and
    tests)."""
    if fmt == "json":
        return json.dumps(list(labels))
    if fmt == "csv":
        return ",".join(labels)
    if fmt == "python_list":
        return repr(list(labels))
    if fmt == "yaml":
        return "\n".join(f"- {x}" for x in labels)
    if fmt == "markdown":
        return "\n".join(f"* {x}" for x in labels)
    if fmt == "xml":
        return "<labels>\n" + "\n".join(f"<label>{x}</label>" for x in labels) + "\n</labels>"
    if fmt == "tsv":
        return "\t".join(labels)
    if fmt == "numbered":
        return "\n".join(f"{i}. {x}" for i, x in enumerate(labels, start=1))
    if fmt == "comma_space":
        return ", ".join(labels)
    if fmt == "pipe":
        return " | ".join(labels)
    raise ValueError(f"unknown label format {fmt!r}")


# --- parsing ------------------------------------------------------------------------------


class LabelParseError(ValueError):
    """The reply holds no usable label list, or one of the wrong length."""


class LabelCountError(LabelParseError):
    def __init__(self, *, expected: int, got: int) -> None:
        super().__init__(f"expected exactly {expected} labels, one per nugget, but got {got}")
        self.expected = expected
        self.got = got


@dataclass(frozen=True)
class ParsedLabels:
    labels: list[Label]
    spans: list[tuple[int, int]]
    """Character offsets of each label's text in the reply."""
    format: str
    """Which of the ten formats the reply was read as."""


_SYNONYMS: Final[Mapping[str, Label]] = {
    "support": "support",
    "supported": "support",
    "supports": "support",
    "full support": "support",
    "fully supported": "support",
    "fully support": "support",
    "partial support": "partial_support",
    "partially support": "partial_support",
    "partially supported": "partial_support",
    "partially supports": "partial_support",
    "partial": "partial_support",
    "not support": "not_support",
    "not supported": "not_support",
    "no support": "not_support",
    "unsupported": "not_support",
    "does not support": "not_support",
    "not": "not_support",
}

_REASONING = re.compile(r"<(reasoning|think)>.*?</\1>", re.S | re.I)
_OPEN_REASONING = re.compile(r"<(reasoning|think)>", re.I)
_CLOSE_REASONING = re.compile(r"</(reasoning|think)>", re.I)
_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_-]*)[ \t]*\r?\n(.*?)(?:```|\Z)", re.S)
_HEADER = re.compile(
    r"^\s*(?:\*\*)?(?:final\s+answer|final\s+labels?|labels?|answer|output)\s*"
    r"(?:\*\*)?\s*[:：]\s*(?:\*\*)?\s*",
    re.I,
)
_XML_LABEL = re.compile(r"<label>\s*(.*?)\s*</label>", re.S | re.I)
_LIST_MARKER = re.compile(
    r"^(?P<marker>\s*(?:[-*+•]\s+|(?:nugget\s*)?\d+\s*[.):\-]\s*|\[\d+\]\s*))", re.I
)
_ITEM_TRIM = " \t\"'`*[](),.;"


def normalize_label(item: str) -> Label | None:
    """A label word as written by a model ('Partially Supported', "'not_support'") → label."""
    key = item.strip(_ITEM_TRIM).lower().replace("_", " ").replace("-", " ")
    key = " ".join(key.split())
    if key in _SYNONYMS:
        return _SYNONYMS[key]
    return None


def answer_region(text: str) -> tuple[int, int]:
    """Offsets of the part of a reply that holds the final labels: after any reasoning
    section, inside a code fence if there is one."""
    start = 0
    last_close = None
    for match in _CLOSE_REASONING.finditer(text):
        last_close = match
    if last_close is not None:
        start = last_close.end()
    elif _OPEN_REASONING.search(text) and not _REASONING.search(text):
        raise LabelParseError("the reasoning section is never closed: no final labels found")
    end = len(text)
    fence = _FENCE.search(text, start)
    if fence is not None:
        start, end = fence.start(2), fence.end(2)
    return start, end


def parse_labels(text: str, *, expected: int, allowed: Sequence[Label] = LABELS) -> ParsedLabels:
    """The `expected` labels in a reply in any of the ten formats.

    Raises `LabelCountError` when the reply lists another number of labels and
    `LabelParseError` when it is not a label list or uses a label outside `allowed`.
    """
    start, end = answer_region(text)
    found = _parse_region(text, start, end)
    if found is None:
        snippet = text[start:end].strip()[:120]
        raise LabelParseError(f"no label list in the reply (got {snippet!r})")
    items, fmt = found
    labels: list[Label] = []
    spans: list[tuple[int, int]] = []
    for i, (a, b) in enumerate(items):
        label = normalize_label(text[a:b])
        if label is None:
            raise LabelParseError(
                f"item {i + 1} ({text[a:b].strip()[:40]!r}) is not one of {', '.join(allowed)}"
            )
        if label not in allowed:
            raise LabelParseError(f"item {i + 1} is {label!r}; use only {', '.join(allowed)}")
        labels.append(label)
        spans.append(_tight(text, a, b))
    if len(labels) != expected:
        raise LabelCountError(expected=expected, got=len(labels))
    return ParsedLabels(labels=labels, spans=spans, format=fmt)


Span = tuple[int, int]


def _parse_region(text: str, start: int, end: int) -> tuple[list[Span], str] | None:
    region = text[start:end]
    header = _HEADER.match(region)
    if header is not None:
        start += header.end()
        region = text[start:end]
    for parser in (_json_like, _xml, _lines, _one_line):
        found = parser(text, start, end)
        if found is not None and found[0]:
            return found
    return None


_STRING = r"\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*'"
_STRING_LIST = re.compile(rf"\[\s*(?:(?:{_STRING})\s*(?:,\s*(?:{_STRING})\s*)*,?\s*)?\]")
_STRING_ITEM = re.compile(r"\"((?:[^\"\\]|\\.)*)\"|'((?:[^'\\]|\\.)*)'")


def _json_like(text: str, start: int, end: int) -> tuple[list[Span], str] | None:
    """A list of quoted strings: a JSON array (or {"labels": [...]}) or a Python list.

    Read with a regular expression rather than `ast.literal_eval`, which is slower and
    needlessly general for model output."""
    region = text[start:end]
    open_at = region.find("[")
    if open_at < 0:
        return None
    close_at = region.rfind("]")
    if close_at < open_at:
        return None
    body = region[open_at : close_at + 1]
    if _STRING_LIST.fullmatch(body) is None:
        return None
    spans: list[Span] = []
    base = start + open_at
    singles = False
    for match in _STRING_ITEM.finditer(body):
        group = 1 if match.group(1) is not None else 2
        singles = singles or group == 2
        spans.append((base + match.start(group), base + match.end(group)))
    return spans, "python_list" if singles else "json"


def _xml(text: str, start: int, end: int) -> tuple[list[Span], str] | None:
    spans = [(m.start(1), m.end(1)) for m in _XML_LABEL.finditer(text, start, end)]
    return (spans, "xml") if spans else None


def _lines(text: str, start: int, end: int) -> tuple[list[Span], str] | None:
    """One label per line: YAML (`- x`), Markdown (`* x`), numbered (`1. x`), or bare."""
    spans: list[Span] = []
    kinds: set[str] = set()
    pos = start
    lines = text[start:end].split("\n")
    if sum(1 for line in lines if line.strip()) < 2:
        return None
    for line in lines:
        line_start, line_end = pos, pos + len(line)
        pos = line_end + 1
        if not line.strip():
            continue
        marker = _LIST_MARKER.match(line)
        a = line_start
        if marker is not None:
            kinds.add(_marker_kind(marker.group("marker")))
            a += marker.end()
        else:
            kinds.add("bare")
        spans.append((a, line_end))
    if len(kinds) > 1:
        kinds.discard("bare")  # e.g. Table 5's YAML example, whose first dash is missing
    kind = kinds.pop() if len(kinds) == 1 else "mixed"
    fmt = {"-": "yaml", "*": "markdown", "n": "numbered"}.get(kind, "lines")
    return spans, fmt


def _marker_kind(marker: str) -> str:
    m = marker.strip()
    if m.startswith("-"):
        return "-"
    if m.startswith(("*", "+", "•")):
        return "*"
    return "n"


def _one_line(text: str, start: int, end: int) -> tuple[list[Span], str] | None:
    """Labels on one line separated by tabs, pipes or commas (or a single label)."""
    region = text[start:end]
    for sep, fmt in (("\t", "tsv"), ("|", "pipe"), (",", "csv")):
        if sep in region:
            if fmt == "csv" and ", " in region:
                fmt = "comma_space"
            spans: list[Span] = []
            pos = start
            for part in region.split(sep):
                if part.strip():
                    spans.append((pos, pos + len(part)))
                pos += len(part) + len(sep)
            return spans, fmt
    if not region.strip():
        return None
    words = list(re.finditer(r"\S+", region))
    if len(words) > 1 and all(w.group().strip(_ITEM_TRIM) in LABELS for w in words):
        # a tab-separated line whose tabs became spaces (App. B Table 5 prints it so)
        return [(start + w.start(), start + w.end()) for w in words], "tsv"
    marker = _LIST_MARKER.match(region)
    skip = marker.end() if marker is not None else 0
    return [(start + skip, end)], "single"


def _tight(text: str, a: int, b: int) -> Span:
    while a < b and text[a] in _ITEM_TRIM:
        a += 1
    while b > a and text[b - 1] in _ITEM_TRIM:
        b -= 1
    return a, b


# --- label probabilities from token log-probabilities --------------------------------------


def label_distributions(
    text: str,
    spans: Sequence[Span],
    logprobs: Sequence[TokenLogprob] | None,
    *,
    allowed: Sequence[Label] = LABELS,
) -> list[dict[Label, float] | None]:
    """p(label) for each parsed label, read at the token where the label's text starts.

    The alternatives among that token's top log-probabilities are mapped to labels by
    their text ("not…" → not_support, "partial…" → partial_support, "sup…" → support),
    summed per label and renormalized over `allowed`. None for a label whose token cannot
    be located (the tokens do not spell the reply) or whose alternatives name no label.
    """
    if not logprobs:
        return [None] * len(spans)
    starts: list[int] = []
    pos = 0
    for tok in logprobs:
        starts.append(pos)
        pos += len(tok.token)
    joined = "".join(t.token for t in logprobs)
    if not joined.startswith(text):  # a trailing stop token may follow the text
        return [None] * len(spans)
    out: list[dict[Label, float] | None] = []
    for a, _ in spans:
        i = _token_at(starts, a)
        tok = logprobs[i]
        offset = a - starts[i]
        alternatives = dict(tok.top)
        alternatives.setdefault(tok.token, tok.logprob)
        mass: dict[Label, float] = dict.fromkeys(allowed, 0.0)
        prefix = tok.token[:offset]
        for alt, lp in alternatives.items():
            if not alt.startswith(prefix):
                continue
            label = _label_of_fragment(alt[offset:], allowed)
            if label is not None:
                mass[label] += math.exp(lp)
        total = math.fsum(mass.values())
        out.append({k: v / total for k, v in mass.items()} if total > 0 else None)
    return out


def _token_at(starts: Sequence[int], offset: int) -> int:
    lo, hi = 0, len(starts) - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if starts[mid] <= offset:
            lo = mid
        else:
            hi = mid - 1
    return lo


_FRAGMENT_FORMS: Final[tuple[tuple[str, Label], ...]] = (
    ("partial_support", "partial_support"),
    ("partially", "partial_support"),
    ("not_support", "not_support"),
    ("not supported", "not_support"),
    ("support", "support"),
)


def _label_of_fragment(fragment: str, allowed: Sequence[Label]) -> Label | None:
    """The label a token's text begins, e.g. 'not' → not_support, ' sup' → None (leading
    space is the caller's offset problem), '' → None."""
    frag = fragment.lower().lstrip("\"'`")
    if not frag:
        return None
    hits = {
        label for form, label in _FRAGMENT_FORMS if form.startswith(frag) or frag.startswith(form)
    }
    if len(hits) == 1:
        label = hits.pop()
        return label if label in allowed else None
    return None
