"""Agreement metrics between predicted and reference labels. Pure functions, no I/O.

Conventions: a label absent from both sides has F1 0 and still counts in the macro average
(so a judge that never says `partial_support` is penalized for it); precision or recall with
a zero denominator is 0.
"""

import math
import random
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

L = TypeVar("L", bound=Hashable)


def confusion(gold: Sequence[L], pred: Sequence[L], labels: Sequence[L]) -> list[list[int]]:
    """matrix[i][j] = pairs with gold labels[i] predicted as labels[j]."""
    if len(gold) != len(pred):
        raise ValueError(f"{len(gold)} gold labels for {len(pred)} predictions")
    index = {label: i for i, label in enumerate(labels)}
    matrix = [[0] * len(labels) for _ in labels]
    for g, p in zip(gold, pred, strict=True):
        matrix[index[g]][index[p]] += 1
    return matrix


@dataclass(frozen=True)
class LabelScores:
    precision: float
    recall: float
    f1: float
    support: int
    """Gold pairs with this label."""


def per_label(matrix: Sequence[Sequence[int]]) -> list[LabelScores]:
    n = len(matrix)
    out = []
    for k in range(n):
        tp = matrix[k][k]
        predicted = sum(matrix[i][k] for i in range(n))
        actual = sum(matrix[k])
        precision = tp / predicted if predicted else 0.0
        recall = tp / actual if actual else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        out.append(LabelScores(precision, recall, f1, actual))
    return out


def accuracy(matrix: Sequence[Sequence[int]]) -> float:
    total = sum(map(sum, matrix))
    return sum(matrix[k][k] for k in range(len(matrix))) / total if total else 0.0


def macro_f1(matrix: Sequence[Sequence[int]]) -> float:
    scores = per_label(matrix)
    return math.fsum(s.f1 for s in scores) / len(scores) if scores else 0.0


def cohen_kappa(matrix: Sequence[Sequence[int]]) -> float:
    """(p_o − p_e) / (1 − p_e); 1.0 when both sides agree on a single label throughout."""
    total = sum(map(sum, matrix))
    if not total:
        return 0.0
    n = len(matrix)
    p_o = sum(matrix[k][k] for k in range(n)) / total
    p_e = math.fsum(
        (sum(matrix[k]) / total) * (sum(matrix[i][k] for i in range(n)) / total) for k in range(n)
    )
    if p_e >= 1.0:
        return 1.0 if p_o >= 1.0 else 0.0
    return (p_o - p_e) / (1 - p_e)


def collapse(matrix: Sequence[Sequence[int]], groups: Sequence[Sequence[int]]) -> list[list[int]]:
    """The matrix with labels merged: groups[g] lists the label indices of new label g."""
    return [[sum(matrix[i][j] for i in gi for j in gj) for gj in groups] for gi in groups]


@dataclass(frozen=True)
class Interval:
    low: float
    high: float


def bootstrap_by_group(
    groups: Sequence[Sequence[tuple[L, L]]],
    labels: Sequence[L],
    metric: Callable[[list[list[int]]], float],
    *,
    reps: int = 1000,
    level: float = 0.95,
    seed: int = 0,
) -> Interval:
    """Percentile interval of `metric` when whole groups (topics) of (gold, pred) pairs are
    resampled with replacement: pairs of one topic are not independent."""
    if not groups:
        return Interval(0.0, 0.0)
    rng = random.Random(seed)
    per_group = [confusion([g for g, _ in grp], [p for _, p in grp], labels) for grp in groups]
    n = len(labels)
    values = []
    for _ in range(reps):
        total = [[0] * n for _ in range(n)]
        for _ in groups:
            m = per_group[rng.randrange(len(groups))]
            for i in range(n):
                for j in range(n):
                    total[i][j] += m[i][j]
        values.append(metric(total))
    values.sort()
    tail = (1 - level) / 2
    low = values[min(reps - 1, math.floor(tail * reps))]
    high = values[min(reps - 1, math.ceil((1 - tail) * reps) - 1)]
    return Interval(low, high)


def report(gold: Sequence[L], pred: Sequence[L], labels: Sequence[L]) -> Mapping[str, object]:
    """Accuracy, macro-F1, kappa, per-label scores and the confusion matrix as plain data."""
    matrix = confusion(gold, pred, labels)
    return {
        "pairs": len(gold),
        "accuracy": accuracy(matrix),
        "macro_f1": macro_f1(matrix),
        "kappa": cohen_kappa(matrix),
        "per_label": {
            str(label): vars(scores)
            for label, scores in zip(labels, per_label(matrix), strict=True)
        },
        "confusion": {"labels": [str(x) for x in labels], "matrix": matrix},
    }
