"""Listwise rankings and the rubric-generator reward (Co-ReAct §3.1, §3.2, App. A).

Rankings are *tiers*, best first: ``[[2], [0, 3], [1]]`` puts candidate 2 first, 0 and 3 tied
second, 1 last. Ranks are 1-based with ties given the average of the positions they share.

- Borda count (§3.1): a candidate in position p (0-based) of n gets n-1-p points; tied
  candidates share the average of their positions' points; points add up over judges and the
  consensus orders candidates by total points (equal totals stay tied).
- Spearman's ρ (§3.2.1, Eq. 2) is computed as the Pearson correlation of the two rank
  vectors, which equals 1 - 6Σd²/(n(n²-1)) when there are no ties and stays correct with
  them. A ranking that ties every candidate carries no order: ρ = 0 (chance, r_rank = 0.5).
- r(R) = 0.75·(ρ+1)/2 + 0.15·r_atom + 0.10·r_fmt, and 0 when the rubric's 4-gram repetition
  rate exceeds 40% (App. A).
- r_fmt and r_atom are Rubricate's definitions (the paper names the terms, not their
  formulas); see `format_score` and `atomicity` and docs/steps.md.
"""

import json
import math
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rubricate_client.constants import (
    LISTWISE_WEIGHTS,
    NEUTRAL_LABELS,
    REPETITION_MAX_RATE,
    REPETITION_NGRAM,
    STEP_RUBRIC_MAX_K,
)
from rubricate_client.errors import DomainError

Tiers = list[list[int]]

# Rubricate's atomicity heuristic (not from the paper): a criterion checks one thing when it
# is one sentence of at most this many words with no coordinated second check.
ATOMIC_MAX_WORDS = 25
_COMPOUND = re.compile(r";|\b(?:and|or|as well as|along with|in addition to|also|plus)\b", re.I)
_SENTENCE_BREAK = re.compile(r"[.!?]\s+\S")
_WORD = re.compile(r"\w+")


# --- rankings -----------------------------------------------------------------------------


def to_tiers(ranking: Sequence[int | Sequence[int]], *, n: int, field: str) -> Tiers:
    """A ranking as sent (indices, a nested list for a tie) checked and turned into tiers."""
    tiers: Tiers = []
    seen: set[int] = set()
    for p, entry in enumerate(ranking):
        members = [entry] if isinstance(entry, int) else list(entry)
        if not members:
            raise DomainError("a tie group must not be empty", field=f"{field}[{p}]")
        for idx in members:
            if not 0 <= idx < n:
                raise DomainError(f"no candidate {idx} (there are {n})", field=f"{field}[{p}]")
            if idx in seen:
                raise DomainError(f"candidate {idx} ranked twice", field=f"{field}[{p}]")
            seen.add(idx)
        tiers.append(members)
    if len(seen) != n:
        missing = sorted(set(range(n)) - seen)
        raise DomainError(f"must rank every candidate; missing {missing}", field=field)
    return tiers


def ranks_from_tiers(tiers: Tiers, *, n: int) -> list[float]:
    """1-based ranks per candidate, ties averaged."""
    ranks = [0.0] * n
    position = 0
    for tier in tiers:
        average = position + (len(tier) + 1) / 2
        for idx in tier:
            ranks[idx] = average
        position += len(tier)
    return ranks


def tiers_from_scores(scores: Sequence[float]) -> Tiers:
    """Higher score first; equal scores tie."""
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
    tiers: Tiers = []
    for idx in order:
        if tiers and scores[tiers[-1][0]] == scores[idx]:
            tiers[-1].append(idx)
        else:
            tiers.append([idx])
    return tiers


def spearman(ranks_a: Sequence[float], ranks_b: Sequence[float]) -> float:
    """Spearman's ρ with ties (Pearson correlation of the rank vectors); 0 if one is flat."""
    n = len(ranks_a)
    if n != len(ranks_b) or n < 2:
        raise ValueError("two rank vectors of the same length ≥ 2")
    mean_a = math.fsum(ranks_a) / n
    mean_b = math.fsum(ranks_b) / n
    da = [a - mean_a for a in ranks_a]
    db = [b - mean_b for b in ranks_b]
    var_a = math.fsum(x * x for x in da)
    var_b = math.fsum(y * y for y in db)
    if var_a == 0.0 or var_b == 0.0:
        return 0.0
    rho = math.fsum(x * y for x, y in zip(da, db, strict=True)) / math.sqrt(var_a * var_b)
    return max(-1.0, min(1.0, rho))


def borda_points(rankings: Sequence[Tiers], *, n: int) -> list[float]:
    """Total Borda points per candidate over all rankings (ties share their positions)."""
    points = [0.0] * n
    for tiers in rankings:
        for idx, rank in enumerate(ranks_from_tiers(tiers, n=n)):
            points[idx] += n - rank
    return points


def borda_consensus(rankings: Sequence[Tiers], *, n: int) -> tuple[Tiers, list[float]]:
    """The consensus tiers and each candidate's Borda points."""
    if not rankings:
        raise ValueError("at least one ranking")
    points = borda_points(rankings, n=n)
    return tiers_from_scores(points), points


# --- neutral relabelling (§3.1) -------------------------------------------------------------


def neutral_labels(n: int) -> list[str]:
    if not 1 <= n <= len(NEUTRAL_LABELS):
        raise ValueError(f"between 1 and {len(NEUTRAL_LABELS)} candidates")
    return list(NEUTRAL_LABELS[:n])


def judge_seed(seed: int, judge: int) -> int:
    """The seed of judge `judge` (its shuffle and its sampling) for a request's `seed`."""
    return (seed * 1_000_003 + judge) % (2**31)


def judge_order(n: int, *, seed: int) -> list[int]:
    """The order one judge sees the candidates in: shown position → candidate index."""
    order = list(range(n))
    random.Random(seed).shuffle(order)
    return order


def labels_to_tiers(ranking: Sequence[str], *, order: Sequence[int]) -> Tiers:
    """A judge's ranking of labels (best first, no ties) mapped back to candidate tiers."""
    labels = neutral_labels(len(order))
    by_label = {label: order[pos] for pos, label in enumerate(labels)}
    if sorted(ranking) != sorted(labels):
        raise ValueError(f"the ranking must list each of {', '.join(labels)} exactly once")
    return [[by_label[label]] for label in ranking]


# --- rubric text: parse, format, atomicity, repetition ---------------------------------------


@dataclass(frozen=True)
class ParsedRubric:
    criteria: list[str]
    weights: list[float]
    strict: bool
    """True when the whole text was the JSON object and nothing else."""


_FENCE = re.compile(r"```[A-Za-z0-9_-]*\s*\n?(.*?)```", re.S)
_TRAILING_COMMA = re.compile(r",\s*([}\]])")


def _rubric_from(data: Any, *, max_k: int) -> tuple[list[str], list[float]] | None:
    if not isinstance(data, dict) or not isinstance(data.get("criteria"), list):
        return None
    items = data["criteria"]
    if not 1 <= len(items) <= max_k:
        return None
    texts: list[str] = []
    weights: list[float] = []
    for item in items:
        if not isinstance(item, dict):
            return None
        text, weight = item.get("criterion"), item.get("weight")
        if not isinstance(text, str) or not text.strip():
            return None
        if isinstance(weight, bool) or not isinstance(weight, int | float):
            return None
        if not math.isfinite(weight) or weight <= 0:
            return None
        texts.append(text.strip())
        weights.append(float(weight))
    return texts, weights


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        try:
            return json.loads(_TRAILING_COMMA.sub(r"\1", text))
        except (json.JSONDecodeError, RecursionError):
            return None


def parse_rubric_text(text: str, *, max_k: int = STEP_RUBRIC_MAX_K) -> ParsedRubric | None:
    """A generator's raw rubric: ``{"criteria": [{"criterion": str, "weight": number > 0}]}``.

    Strict when the text is exactly that JSON; otherwise the object is looked for inside code
    fences or between the first ``{`` and the last ``}`` (tolerant). None when nothing valid
    is found.
    """
    try:
        strict = _rubric_from(json.loads(text.strip()), max_k=max_k)
    except (json.JSONDecodeError, RecursionError):
        strict = None
    if strict is not None:
        return ParsedRubric(criteria=strict[0], weights=strict[1], strict=True)
    candidates = [m.group(1) for m in _FENCE.finditer(text)]
    first, last = text.find("{"), text.rfind("}")
    if 0 <= first < last:
        candidates.append(text[first : last + 1])
    for candidate in candidates:
        found = _rubric_from(_loads(candidate.strip()), max_k=max_k)
        if found is not None:
            return ParsedRubric(criteria=found[0], weights=found[1], strict=False)
    return None


def format_score(parsed: ParsedRubric | None, *, k: int | None) -> float:
    """r_fmt: 1 = exactly the expected JSON (with k criteria when k is given); 0.5 = a valid
    rubric recovered from around other text, or the wrong number of criteria; 0 = none."""
    if parsed is None:
        return 0.0
    if parsed.strict and (k is None or len(parsed.criteria) == k):
        return 1.0
    return 0.5


def is_atomic(criterion: str) -> bool:
    words = _WORD.findall(criterion)
    return (
        0 < len(words) <= ATOMIC_MAX_WORDS
        and not _COMPOUND.search(criterion)
        and not _SENTENCE_BREAK.search(criterion.strip())
    )


def atomicity(criteria: Sequence[str]) -> float:
    """r_atom: the fraction of criteria that check a single thing (`is_atomic`)."""
    if not criteria:
        return 0.0
    return sum(1 for c in criteria if is_atomic(c)) / len(criteria)


def repetition_rate(texts: Sequence[str], *, n: int = REPETITION_NGRAM) -> float:
    """Share of word n-grams that repeat an earlier one: 1 - unique/total, pooled over
    `texts` (n-grams do not cross text boundaries); 0 when there are none."""
    grams: list[tuple[str, ...]] = []
    for text in texts:
        words = [w.lower() for w in _WORD.findall(text)]
        grams.extend(tuple(words[i : i + n]) for i in range(len(words) - n + 1))
    if not grams:
        return 0.0
    return 1.0 - len(set(grams)) / len(grams)


@dataclass(frozen=True)
class RubricReward:
    rho: float | None
    """None when the rubric could not be parsed (no induced ranking)."""
    r_rank: float
    r_atom: float
    r_fmt: float
    repetition: float
    gated: bool
    """True when the repetition gate zeroed the reward."""
    total: float


def rubric_reward(
    *,
    rho: float | None,
    r_atom: float,
    r_fmt: float,
    repetition: float,
    weights: tuple[float, float, float] = LISTWISE_WEIGHTS,
    max_repetition: float = REPETITION_MAX_RATE,
) -> RubricReward:
    """Eq. 3 with the App. A repetition gate; an unparseable rubric has r_rank = 0."""
    r_rank = 0.0 if rho is None else (rho + 1.0) / 2.0
    gated = repetition > max_repetition
    w1, w2, w3 = weights
    total = 0.0 if gated else w1 * r_rank + w2 * r_atom + w3 * r_fmt
    return RubricReward(
        rho=rho,
        r_rank=r_rank,
        r_atom=r_atom,
        r_fmt=r_fmt,
        repetition=repetition,
        gated=gated,
        total=total,
    )


def group_advantages(rewards: Sequence[float], *, eps: float = 1e-6) -> list[float]:
    """GRPO's group-relative advantages (Co-ReAct Eq. 5), population std plus ε."""
    if not rewards:
        return []
    mean = math.fsum(rewards) / len(rewards)
    std = math.sqrt(math.fsum((r - mean) ** 2 for r in rewards) / len(rewards))
    return [(r - mean) / (std + eps) for r in rewards]
