"""Reflection candidates of the meta-policy (RubricEM §3.4, App. D.6.1–D.6.2): the two-block
format check, the utility u of a judged candidate, and the choice of the best one.

A candidate is exactly two blocks, in order:

    <reflection_rubrics> the four categories, each a heading with its guidance </reflection_rubrics>
    <reflection_takeaways> one to four portable lessons </reflection_takeaways>

A candidate that breaks the format gets reward 0 with the reason: that 0 is a format verdict
on the policy's output, not a judge failure.
"""

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Literal

from rubricate_client.schemas.reflections import CandidateStatus, Dimension

# RubricEM App. D.6.1: the four categories of the <reflection_rubrics> block, in order.
CATEGORIES: Final[tuple[str, ...]] = (
    "Critical Requirement",
    "Analytical Approach",
    "Communication & Structure",
    "Pitfalls",
)
# RubricEM App. D.6.1: the <reflection_takeaways> block holds 1-4 concise portable lessons.
MIN_TAKEAWAYS: Final = 1
MAX_TAKEAWAYS: Final = 4
# A bound on a candidate's size (not from the paper): a reflection is a page, not a book.
MAX_REFLECTION_CHARS: Final = 12_000

Use = Literal["within", "cross"]

# RubricEM App. D.6.2: judge dimensions and their weights (each scored 0.0-1.0).
DIMENSIONS: Final[tuple[Dimension, ...]] = ("diagnostic_accuracy", "specificity", "scope_balance")
DIMENSION_WEIGHTS: Final[dict[Dimension, float]] = {
    "diagnostic_accuracy": 0.4,
    "specificity": 0.3,
    "scope_balance": 0.3,
}
# RubricEM §3.4 / DESIGN.md: scored for within-episode refinement and cross-episode transfer;
# u = ½(u_within + u_cross).
USES: Final[tuple[Use, ...]] = ("within", "cross")
# RubricEM App. D.4: n = 8 reflection candidates per sampled trajectory.
DEFAULT_CANDIDATES: Final = 8

_RUBRICS_TAG = "reflection_rubrics"
_TAKEAWAYS_TAG = "reflection_takeaways"
_ANY_TAG = re.compile(r"<\s*(/?)\s*(reflection_rubrics|reflection_takeaways)\s*>", re.I)
_LIST_MARK = re.compile(r"^\s*(?:[-*•+]|\d{1,2}[.)])\s+")
_HEADING_DECOR = re.compile(r"^[\s#>*_\-•+]*(?:\d{1,2}[.)]\s*)?")


def _singular(word: str) -> str:
    if word.endswith("ches"):
        return word[:-2]
    return word[:-1] if word.endswith("s") and len(word) > 3 else word


def _category_key(text: str) -> str:
    """'**Communication and Structure**' -> 'communication structure'."""
    lowered = text.casefold().replace("&", " ").replace("/", " ")
    return " ".join(_singular(w) for w in re.findall(r"[a-z]+", lowered) if w != "and")


_CATEGORY_KEYS: Final = {_category_key(c): c for c in CATEGORIES}


@dataclass(frozen=True)
class ParsedReflection:
    """A well-formed candidate: guidance lines per category, and the lessons."""

    rubrics: dict[str, list[str]]
    """Category (as in CATEGORIES) -> its guidance lines, list markers removed."""
    takeaways: list[str]


@dataclass(frozen=True)
class FormatCheck:
    valid: bool
    reason: str | None = None
    """Why the candidate is malformed (None when valid)."""
    parsed: ParsedReflection | None = None


def _invalid(reason: str) -> FormatCheck:
    return FormatCheck(valid=False, reason=reason)


def _split_items(body: str) -> list[str]:
    """List items (a marker starts one, other lines continue it); without any marker, every
    non-empty line is an item."""
    lines = [ln.rstrip() for ln in body.splitlines() if ln.strip()]
    if not any(_LIST_MARK.match(ln) for ln in lines):
        return [ln.strip() for ln in lines]
    items: list[str] = []
    for line in lines:
        if _LIST_MARK.match(line):
            items.append(_LIST_MARK.sub("", line, count=1).strip())
        elif items:
            items[-1] = f"{items[-1]} {line.strip()}"
        else:
            items.append(line.strip())
    return [i for i in items if i]


def _heading(line: str) -> tuple[str, str] | None:
    """(category, rest of the line) when the line opens a category, else None.

    Accepts markdown decoration and numbering ('### 1. **Pitfalls:** ...'), '&' or 'and',
    and plurals ('Critical Requirements').
    """
    stripped = _HEADING_DECOR.sub("", line).strip()
    name, sep, rest = stripped.partition(":")
    category = _CATEGORY_KEYS.get(_category_key(name))
    if category is None:
        return None
    return category, rest.strip(" *_") if sep else ""


def _parse_rubrics(body: str) -> dict[str, list[str]] | str:
    """Guidance per category, or the reason the block is malformed."""
    sections: dict[str, list[str]] = {}
    current: str | None = None
    lines: dict[str, list[str]] = {}
    for line in body.splitlines():
        if not line.strip():
            continue
        found = _heading(line)
        if found is not None:
            category, rest = found
            if category in sections:
                return f"category {category!r} appears twice in <{_RUBRICS_TAG}>"
            sections[category] = []
            lines[category] = [rest] if rest else []
            current = category
            continue
        if current is None:
            return (
                f"text before the first category in <{_RUBRICS_TAG}> (expected the four "
                f"categories {', '.join(CATEGORIES)})"
            )
        lines[current].append(line)
    missing = [c for c in CATEGORIES if c not in sections]
    if missing:
        return f"<{_RUBRICS_TAG}> lacks the categories {missing}"
    for category in CATEGORIES:
        items = _split_items("\n".join(lines[category]))
        if not items:
            return f"category {category!r} in <{_RUBRICS_TAG}> is empty"
        sections[category] = items
    return {c: sections[c] for c in CATEGORIES}


def check_format(text: str) -> FormatCheck:
    """The two-block format check of App. D.6.1 (only whitespace may surround the blocks)."""
    if not text.strip():
        return _invalid("empty reflection")
    if len(text) > MAX_REFLECTION_CHARS:
        return _invalid(f"reflection longer than {MAX_REFLECTION_CHARS} characters")
    tags = [
        (m.group(1) == "/", m.group(2).lower(), m.start(), m.end()) for m in _ANY_TAG.finditer(text)
    ]
    expected = [
        (False, _RUBRICS_TAG),
        (True, _RUBRICS_TAG),
        (False, _TAKEAWAYS_TAG),
        (True, _TAKEAWAYS_TAG),
    ]
    if [(closing, name) for closing, name, _, _ in tags] != expected:
        found = " ".join(f"<{'/' if c else ''}{n}>" for c, n, _, _ in tags) or "none"
        return _invalid(
            f"expected exactly <{_RUBRICS_TAG}>…</{_RUBRICS_TAG}> followed by "
            f"<{_TAKEAWAYS_TAG}>…</{_TAKEAWAYS_TAG}>; tags found: {found}"
        )
    (_, _, r_open_s, r_open_e), (_, _, r_close_s, r_close_e) = tags[0], tags[1]
    (_, _, t_open_s, t_open_e), (_, _, t_close_s, t_close_e) = tags[2], tags[3]
    outside = text[:r_open_s] + text[r_close_e:t_open_s] + text[t_close_e:]
    if outside.strip():
        return _invalid("text outside the two blocks")
    rubrics = _parse_rubrics(text[r_open_e:r_close_s])
    if isinstance(rubrics, str):
        return _invalid(rubrics)
    takeaways = _split_items(text[t_open_e:t_close_s])
    if len(takeaways) < MIN_TAKEAWAYS:
        return _invalid(
            f"<{_TAKEAWAYS_TAG}> has no lesson (expected {MIN_TAKEAWAYS}-{MAX_TAKEAWAYS})"
        )
    if len(takeaways) > MAX_TAKEAWAYS:
        return _invalid(
            f"<{_TAKEAWAYS_TAG}> has {len(takeaways)} lessons (expected {MIN_TAKEAWAYS}-"
            f"{MAX_TAKEAWAYS})"
        )
    return FormatCheck(valid=True, parsed=ParsedReflection(rubrics=rubrics, takeaways=takeaways))


# --- utility ------------------------------------------------------------------------------


@dataclass(frozen=True)
class UseScores:
    """The judge's three dimension scores (each in [0, 1]) for one use of a reflection."""

    diagnostic_accuracy: float
    specificity: float
    scope_balance: float

    def __post_init__(self) -> None:
        for name in DIMENSIONS:
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {value}")

    def as_dict(self) -> dict[Dimension, float]:
        return {d: float(getattr(self, d)) for d in DIMENSIONS}


def weighted_use_score(
    scores: UseScores, *, weights: Mapping[Dimension, float] = DIMENSION_WEIGHTS
) -> float:
    """u_use = Σ_d w_d · s_d (App. D.6.2 weights sum to 1)."""
    values = scores.as_dict()
    return sum(weights[d] * values[d] for d in DIMENSIONS)


@dataclass(frozen=True)
class Utility:
    within: float
    cross: float
    u: float


def utility(
    *,
    within: UseScores,
    cross: UseScores,
    weights: Mapping[Dimension, float] = DIMENSION_WEIGHTS,
) -> Utility:
    """u = ½(u_within + u_cross) (RubricEM §3.4)."""
    u_within = weighted_use_score(within, weights=weights)
    u_cross = weighted_use_score(cross, weights=weights)
    return Utility(within=u_within, cross=u_cross, u=0.5 * (u_within + u_cross))


@dataclass(frozen=True)
class CandidateOutcome:
    """What became of one candidate: its reward, or why it has none."""

    status: CandidateStatus
    u: float | None = None
    """0.0 for a malformed candidate; None when the judge failed (no reward, flagged)."""
    reason: str | None = None


def best_candidate(outcomes: Sequence[CandidateOutcome]) -> int | None:
    """Index of the highest-u judged candidate (ties: the earliest); None if none was
    judged. Malformed candidates are never the best (App. D.4: valid format only)."""
    best: int | None = None
    for i, outcome in enumerate(outcomes):
        if outcome.status != "scored" or outcome.u is None:
            continue
        if best is None or outcome.u > (outcomes[best].u or 0.0):
            best = i
    return best


@dataclass(frozen=True)
class BankDecision:
    write: bool
    reason: str
    index: int | None = None


def bank_decision(
    outcomes: Sequence[CandidateOutcome], *, accept_threshold: float = 0.0
) -> BankDecision:
    """Whether the best candidate goes to the bank.

    Only the best valid, judged candidate is written (RubricEM App. D.4), and only when
    every valid candidate was judged: a judging that failed for some candidate must not
    replace what the bank holds, since the failed one may have been the best.
    """
    failed = [i for i, o in enumerate(outcomes) if o.status == "judge_failed"]
    best = best_candidate(outcomes)
    if best is None:
        if failed:
            return BankDecision(write=False, reason="no candidate could be judged")
        return BankDecision(write=False, reason="no candidate has the valid two-block format")
    if failed:
        return BankDecision(
            write=False,
            reason=f"the judge failed on candidates {failed}; the bank is left unchanged",
            index=best,
        )
    u = outcomes[best].u or 0.0
    if u < accept_threshold:
        return BankDecision(
            write=False,
            reason=f"best u {u:.3f} is below the acceptance threshold {accept_threshold}",
            index=best,
        )
    return BankDecision(write=True, reason="best valid candidate", index=best)
