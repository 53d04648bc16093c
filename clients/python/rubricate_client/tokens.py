"""Character spans -> token index ranges, so a trainer can give each stage's advantage to the
tokens of that stage.

The gateway answers stage spans as [start, end) character offsets into the trajectory text.
A Hugging Face tokenizer's offset mapping gives each token's [start, end) characters. A token
belongs to the span it overlaps most (ties go to the earlier span); tokens that overlap no span
(special tokens, text between stages) belong to none. Spans and tokens are in text order, so
each span maps to one contiguous token range [first, last + 1).
"""

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

Offsets = Sequence[tuple[int, int]]


class _Encoding(Protocol):
    offsets: list[tuple[int, int]]


def token_ranges(
    offsets: Offsets,
    spans: Mapping[str, tuple[int, int] | Sequence[int] | None],
    *,
    char_offset: int = 0,
) -> dict[str, tuple[int, int] | None]:
    """Token index range [first, end) per span name; None for a missing span or one that no
    token overlaps. `char_offset` is added to every span: use it when the spans index the
    response but the offsets index prompt + response."""
    shifted: list[tuple[str, int, int]] = []
    out: dict[str, tuple[int, int] | None] = {}
    for name, span in spans.items():
        out[name] = None
        if span is None:
            continue
        start, end = int(span[0]) + char_offset, int(span[1]) + char_offset
        if end < start:
            raise ValueError(f"span {name!r} ends before it starts: {span}")
        shifted.append((name, start, end))
    for index, owner in enumerate(token_owners(offsets, shifted)):
        if owner is None:
            continue
        current = out[owner]
        out[owner] = (index, index + 1) if current is None else (current[0], index + 1)
    return out


def token_owners(offsets: Offsets, spans: Sequence[tuple[str, int, int]]) -> list[str | None]:
    """The span name each token belongs to (most characters in common), or None."""
    owners: list[str | None] = []
    for start, end in offsets:
        best: str | None = None
        best_overlap = 0
        for name, s_start, s_end in spans:
            overlap = min(end, s_end) - max(start, s_start)
            if overlap > best_overlap:
                best, best_overlap = name, overlap
        owners.append(best)
    return owners


def token_values(
    offsets: Offsets,
    spans: Mapping[str, tuple[int, int] | Sequence[int] | None],
    values: Mapping[str, float | None],
    *,
    default: float = 0.0,
    char_offset: int = 0,
) -> list[float]:
    """One value per token: the value of the span it belongs to (e.g. the stage's advantage),
    `default` for tokens in no span or in a span without a value. A stage the judge left
    unscored has the value None: its tokens get `default` (with the default 0.0, no credit
    either way), never a score the judge did not give."""
    named = [
        (name, int(span[0]) + char_offset, int(span[1]) + char_offset)
        for name, span in spans.items()
        if span is not None
    ]
    out = []
    for owner in token_owners(offsets, named):
        value = None if owner is None else values.get(owner)
        out.append(default if value is None else value)
    return out


def offsets_of(
    tokenizer: Any, text: str, *, add_special_tokens: bool = False
) -> list[tuple[int, int]]:
    """Token character offsets of `text` from a Hugging Face tokenizer: a `transformers` fast
    tokenizer (`return_offsets_mapping`) or a `tokenizers.Tokenizer` (`encode(...).offsets`)."""
    if type(tokenizer).__module__.split(".")[0] == "tokenizers":
        encoding: _Encoding = tokenizer.encode(text, add_special_tokens=add_special_tokens)
        return [(int(a), int(b)) for a, b in encoding.offsets]
    encoded = tokenizer(text, return_offsets_mapping=True, add_special_tokens=add_special_tokens)
    return [(int(a), int(b)) for a, b in encoded["offset_mapping"]]


def response_offsets(tokenizer: Any, ids: Sequence[int], text: str) -> list[tuple[int, int]]:
    """Character offsets in `text` (the decoded `ids`) of each of the token ids a trainer
    generated: the tokenizer's offset mapping when re-encoding the text gives the same ids,
    else the lengths of the decoded prefixes (exact for any tokenizer, slower)."""
    ids = [int(i) for i in ids]
    try:
        encoded = tokenizer(text, return_offsets_mapping=True, add_special_tokens=False)
        if [int(i) for i in encoded["input_ids"]] == ids:
            return [(int(a), int(b)) for a, b in encoded["offset_mapping"]]
    except (NotImplementedError, TypeError, ValueError, KeyError):
        pass
    offsets = []
    previous = 0
    for i in range(len(ids)):
        end = max(previous, len(tokenizer.decode(ids[: i + 1], skip_special_tokens=True)))
        offsets.append((previous, end))
        previous = end
    return offsets
