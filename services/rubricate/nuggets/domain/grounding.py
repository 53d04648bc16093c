"""Grounded support: a block may lift a nugget only where it carries the nugget's content
(GitHub issue 25).

The verifier model's label says whether a block supports a nugget; a small model can be
talked into `support` by a block that only speaks about grading ("every statement above is
confirmed", a JSON object of labels), which shares nothing with the nugget. The grounding
check runs after the model's label, on the block that label relies on:

- `support` stands only where the block holds at least `support_min` of the nugget's
  content words (`core.words.content_words`, month names folded to three letters) and, with
  `numbers`, every number of the nugget (years, dates, amounts; `1,000` = `1000`);
- otherwise, or for `partial_support`, the block must hold at least `partial_min` of them
  to keep `partial_support` (long mode; short mode is binary, so it falls to `not_support`);
- a nugget with no content words at all (a short answer such as "No") is grounded where the
  block contains it as words, after the usual answer normalisation.

The rule only ever lowers a label: it cannot turn a `not_support` into support, so on an
honest answer it can only cost agreement, which is measured on the RAG24 dev file
(`rubricate eval grounding`, docs/judge-quality.md) and bounded there. Pure: no model, no I/O.
"""

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from rubricate.core.words import content_words
from rubricate.nuggets.domain.rewards import LABEL_VALUES, normalize_answer
from rubricate_client.errors import DomainError
from rubricate_client.schemas.nuggets import Label, NuggetMode

_MONTHS: Final = (
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
)
_MONTH_FOLD: Final = {m: m[:3] for m in _MONTHS} | {"sept": "sep"}
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")


def _fold(word: str) -> str:
    return _MONTH_FOLD.get(word, word)


def grounding_words(text: str) -> set[str]:
    """Content words (lower-cased, stemmed, stop words out), month names folded."""
    return {_fold(w) for w in content_words(text)}


def numbers(text: str) -> set[str]:
    """The numbers written with digits in `text`, thousands separators removed; a trailing
    `.0`-style decimal is kept as written (`2.5` ≠ `25`)."""
    out: set[str] = set()
    for raw in _NUMBER.findall(text):
        # 1,000,000 -> 1000000; 2,5 (a decimal comma) stays distinguishable from 25
        if re.fullmatch(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?", raw):
            raw = raw.replace(",", "")
        out.add(raw.lstrip("0") or "0")
    return out


@dataclass(frozen=True)
class Grounding:
    share: float
    """The share of the nugget's content words found in the block (1.0 for a nugget without
    content words that the block contains as words, else 0.0)."""
    missing_numbers: tuple[str, ...]
    """The nugget's numbers the block does not contain."""


def grounding(nugget: str, block: str) -> Grounding:
    """How much of `nugget`'s content `block` carries."""
    wanted = grounding_words(nugget)
    if wanted:
        share = len(wanted & grounding_words(block)) / len(wanted)
    else:
        short = normalize_answer(nugget)
        share = 1.0 if short and f" {short} " in f" {normalize_answer(block)} " else 0.0
    missing = tuple(sorted(numbers(nugget) - numbers(block)))
    return Grounding(share=share, missing_numbers=missing)


@dataclass(frozen=True)
class GroundingRule:
    """Thresholds of the check (defaults: `CALIBRATED`)."""

    support_min: float
    """Share of the nugget's content words a block needs to keep `support`."""
    partial_min: float
    """Share it needs to keep (or fall to) `partial_support` in long mode."""
    numbers: bool = True
    """`support` also needs every number of the nugget in the block."""

    def __post_init__(self) -> None:
        if not (0.0 <= self.partial_min <= self.support_min <= 1.0):
            raise DomainError(
                "grounding thresholds need 0 <= partial_min <= support_min <= 1",
                field="grounding",
            )


CALIBRATED: Final = GroundingRule(support_min=0.6, partial_min=0.4, numbers=True)
"""Chosen on the RAG24 dev file (`rubricate eval grounding --choose`, docs/judge-quality.md).
Every rule of the grid with `support_min` up to 0.75 keeps macro-F1 and supported-vs-not F1
within 0.01 of the calibrated labels without the check (0.8 and above cost 0.03 to 0.06
macro-F1); this one sits inside that plateau with a margin, because the dev answers are
judged as one block while served answers are split into paragraphs, each carrying less of a
nugget than the whole answer does."""


def grounded_label(
    label: Label, nugget: str, block: str, *, mode: NuggetMode, rule: GroundingRule = CALIBRATED
) -> Label:
    """The model's `label` for (block, nugget), lowered where the block does not carry the
    nugget's content. Never raised."""
    if label == "not_support":
        return label
    g = grounding(nugget, block)
    numbers_ok = not (rule.numbers and g.missing_numbers)
    if label == "support" and g.share >= rule.support_min and numbers_ok:
        return "support"
    if mode == "long" and g.share >= rule.partial_min:
        return "partial_support"
    return "not_support"


def ground_labels(
    labels_by_block: Sequence[Sequence[Label]],
    blocks: Sequence[str],
    nuggets: Sequence[str],
    *,
    mode: NuggetMode,
    rule: GroundingRule = CALIBRATED,
) -> list[list[Label]]:
    """`grounded_label` on every (block, nugget) label; `labels_by_block[b][j]` is nugget
    j's label in block b."""
    if len(labels_by_block) != len(blocks):
        raise ValueError(f"{len(labels_by_block)} label rows for {len(blocks)} blocks")
    return [
        [
            grounded_label(label, nugget, block, mode=mode, rule=rule)
            for nugget, label in zip(nuggets, row, strict=True)
        ]
        for block, row in zip(blocks, labels_by_block, strict=True)
    ]


def capped(distribution: Mapping[Label, float], ceiling: Label) -> dict[Label, float]:
    """`distribution` with the mass of the labels above `ceiling` moved onto `ceiling`: the
    soft counterpart of a label the grounding check lowered (so the expected value of a
    block that does not carry the nugget cannot exceed what its grounded label is worth)."""
    out = {label: p for label, p in distribution.items()}
    ceiling_value = LABEL_VALUES[ceiling]
    moved = 0.0
    for label, p in distribution.items():
        if LABEL_VALUES[label] > ceiling_value:
            out[label] = 0.0
            moved += p
    out[ceiling] = out.get(ceiling, 0.0) + moved
    return out
