"""Nugget-as-rubric rewards (Search-Gen-V §3.1, §3.3, §4.4).

An answer is split into blocks (paragraphs); each (block, nugget) pair gets a label; labels
are max-pooled over blocks and the reward is the weighted mean of the label values,
R = Σ w·v / Σ w (Eq. 3). Short-form answers are judged as one block against one
ground-truth nugget with binary labels, and a normalized exact match decides first (§4.4).

Everything here is pure: the services call it with labels the verifier model produced.
"""

import math
import re
import string
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from rubricate_client.errors import DomainError
from rubricate_client.schemas.nuggets import MAX_BATCH_SIZE as MAX_BATCH_SIZE
from rubricate_client.schemas.nuggets import Importance, Label, NuggetMode

# Search-Gen-V §3.3: the ternary labels, in order from best to worst.
LABELS: Final[tuple[Label, ...]] = ("support", "partial_support", "not_support")
# Search-Gen-V §4.4: short-form answers drop `partial_support` (binary judgment).
BINARY_LABELS: Final[tuple[Label, ...]] = ("support", "not_support")

# DESIGN.md "Nuggets" (Search-Gen-V Eq. 3 with ternary labels): v = 1 / 0.5 / 0.
LABEL_VALUES: Final[Mapping[Label, float]] = {
    "support": 1.0,
    "partial_support": 0.5,
    "not_support": 0.0,
}
# DESIGN.md "Nuggets" (Search-Gen-V §3.2 vital/okay labelling): w = 1 (vital) / 0.5 (okay).
IMPORTANCE_WEIGHTS: Final[Mapping[Importance, float]] = {"vital": 1.0, "okay": 0.5}

# Search-Gen-V App. B.4 / App. C: the verifier sees 1–10 nuggets per call.
DEFAULT_BATCH_SIZE: Final = 10
# Measured (docs/judge-quality.md, RAG24 dev file): a 1.5B model on CPU labels much better
# with one nugget per call (the answer block as a cached prefix) than with ten.
EMBEDDED_BATCH_SIZE: Final = 1


def labels_for(mode: NuggetMode) -> tuple[Label, ...]:
    return BINARY_LABELS if mode == "short" else LABELS


# --- blocks -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Block:
    index: int
    start: int
    """Character offset of the block's first character in the answer."""
    end: int
    """Offset one past its last character."""
    text: str


_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*(?:\r?\n[ \t]*)+")


def split_blocks(answer: str, *, max_blocks: int | None = None) -> list[Block]:
    """The answer's paragraphs (Search-Gen-V §3.3: one block per paragraph).

    Paragraphs are separated by blank lines; whitespace-only ones are dropped and each block
    is stripped, with offsets pointing into `answer`. With `max_blocks`, an answer with more
    paragraphs has consecutive paragraphs packed into that many blocks of similar length, so
    the number of verifier calls stays bounded. An empty answer has no blocks.
    """
    if max_blocks is not None and max_blocks < 1:
        raise DomainError("max_blocks must be at least 1", field="max_blocks")
    spans: list[tuple[int, int]] = []
    start = 0
    for match in _PARAGRAPH_BREAK.finditer(answer):
        spans.append((start, match.start()))
        start = match.end()
    spans.append((start, len(answer)))
    stripped = [s for s in (_strip_span(answer, a, b) for a, b in spans) if s is not None]
    if max_blocks is not None and len(stripped) > max_blocks:
        stripped = _pack(stripped, max_blocks)
    return [Block(index=i, start=a, end=b, text=answer[a:b]) for i, (a, b) in enumerate(stripped)]


def whole_block(answer: str) -> list[Block]:
    """The answer as a single block (short mode), or none when it is blank."""
    span = _strip_span(answer, 0, len(answer))
    return (
        []
        if span is None
        else [Block(index=0, start=span[0], end=span[1], text=answer[span[0] : span[1]])]
    )


def _strip_span(text: str, start: int, end: int) -> tuple[int, int] | None:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return (start, end) if end > start else None


def _pack(spans: list[tuple[int, int]], n_blocks: int) -> list[tuple[int, int]]:
    """Consecutive spans merged into exactly `n_blocks` groups of similar total length."""
    total = sum(b - a for a, b in spans)
    target = total / n_blocks
    groups: list[list[tuple[int, int]]] = [[]]
    size = 0
    for i, span in enumerate(spans):
        remaining_spans = len(spans) - i
        remaining_groups = n_blocks - len(groups)
        must_open = remaining_spans == remaining_groups  # one span left per group to fill
        if groups[-1] and (size >= target or must_open) and remaining_groups > 0:
            groups.append([])
            size = 0
        groups[-1].append(span)
        size += span[1] - span[0]
    return [(group[0][0], group[-1][1]) for group in groups]


# --- pooling and reward -------------------------------------------------------------------


@dataclass(frozen=True)
class Pooled:
    label: Label
    block: int | None
    """The block that decided the label: the first block with the best label; None when no
    block supports the nugget at all (`not_support` everywhere)."""


def max_pool(labels_by_block: Sequence[Sequence[Label]], *, n_nuggets: int) -> list[Pooled]:
    """Each nugget's best label over all blocks (Search-Gen-V §3.3: max-pooling).

    `labels_by_block[b][j]` is nugget j's label in block b. Ties go to the earliest block.
    An answer without blocks supports nothing.
    """
    pooled = [Pooled(label="not_support", block=None) for _ in range(n_nuggets)]
    for b, row in enumerate(labels_by_block):
        if len(row) != n_nuggets:
            raise ValueError(f"block {b} has {len(row)} labels for {n_nuggets} nuggets")
        for j, label in enumerate(row):
            if LABEL_VALUES[label] > LABEL_VALUES[pooled[j].label]:
                pooled[j] = Pooled(label=label, block=b)
    return pooled


def weights_of(importances: Sequence[Importance]) -> list[float]:
    return [IMPORTANCE_WEIGHTS[i] for i in importances]


def reward(values: Sequence[float], weights: Sequence[float]) -> float:
    """R = Σ w·v / Σ w (Search-Gen-V Eq. 3); `values` are label values in [0, 1]."""
    if len(values) != len(weights):
        raise ValueError(f"{len(values)} values for {len(weights)} weights")
    total = math.fsum(weights)
    if not values or total <= 0:
        raise DomainError(
            "a reward needs at least one nugget with a positive weight", field="nuggets"
        )
    return math.fsum(w * v for w, v in zip(weights, values, strict=True)) / total


def label_reward(labels: Sequence[Label], importances: Sequence[Importance]) -> float:
    return reward([LABEL_VALUES[label] for label in labels], weights_of(importances))


# --- label probabilities (soft rewards) --------------------------------------------------

Distribution = Mapping[Label, float]


def expected_value(probabilities: Distribution) -> float:
    """E[v] = Σ p(label)·v(label) over a (normalized) label distribution."""
    return math.fsum(LABEL_VALUES[label] * p for label, p in probabilities.items())


@dataclass(frozen=True)
class SoftPooled:
    probabilities: dict[Label, float]
    expected_value: float
    block: int | None
    """The block whose distribution has the highest expected value."""


def soft_max_pool(
    distributions_by_block: Sequence[Sequence[Distribution | None]], *, n_nuggets: int
) -> list[SoftPooled | None]:
    """Soft counterpart of `max_pool`: per nugget, the block distribution with the highest
    expected value. A nugget is None when any of its blocks lacks a distribution (the soft
    reward is then undefined rather than guessed)."""
    out: list[SoftPooled | None] = []
    for j in range(n_nuggets):
        best: SoftPooled | None = None
        complete = True
        for b, row in enumerate(distributions_by_block):
            dist = row[j]
            if dist is None:
                complete = False
                break
            ev = expected_value(dist)
            if best is None or ev > best.expected_value:
                best = SoftPooled(probabilities=dict(dist), expected_value=ev, block=b)
        out.append(best if complete else None)
    return out


# --- short form: normalized exact match (Search-Gen-V §4.4) --------------------------------

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.S | re.I)
_PUNCTUATION = frozenset(string.punctuation) | {"‘", "’", "“", "”", "–", "—"}


def normalize_answer(text: str) -> str:
    """Lower case, no punctuation, no articles, single spaces (the usual EM normalization)."""
    text = unicodedata.normalize("NFKC", text).casefold()
    text = "".join(" " if c in _PUNCTUATION else c for c in text)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def final_answer(text: str) -> str:
    """The content of the last `<answer>…</answer>` when present, else the whole text."""
    found = _ANSWER_TAG.findall(text)
    return found[-1] if found else text


def exact_match(prediction: str, ground_truth: str) -> bool:
    """Normalized EM of a short answer (its `<answer>` tag's content if any) against the
    ground-truth nugget."""
    predicted = normalize_answer(final_answer(prediction))
    return bool(predicted) and predicted == normalize_answer(ground_truth)
