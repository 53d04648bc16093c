"""The lexical-overlap judge and prior, calibrated on labelled records (pure, no model).

Thresholds are fitted on records outside the evaluated slice (other topics of the dev
file), by grid search for the best three-label macro-F1, so the figures reported for the
slice are out of sample.
"""

from collections.abc import Sequence

from rubricate.evaluation import metrics
from rubricate.evaluation.nuggets import Record
from rubricate.nuggets.domain.lexical import (
    OverlapThresholds,
    PriorRule,
    overlap,
    overlap_label,
    with_prior,
)
from rubricate.nuggets.domain.rewards import LABELS
from rubricate_client.schemas.nuggets import Label

_GRID = [round(0.05 * i, 2) for i in range(1, 21)]


def overlaps(record: Record) -> list[float]:
    return [overlap(n.text, record.answer) for n in record.nuggets]


def calibrate(records: Sequence[Record]) -> OverlapThresholds:
    """The (support, partial) thresholds with the best macro-F1 on `records`."""
    scored = [(n.label, s) for r in records for n, s in zip(r.nuggets, overlaps(r), strict=True)]
    gold = [g for g, _ in scored]
    best: tuple[float, OverlapThresholds] | None = None
    for hi in _GRID:
        for lo in (x for x in _GRID if x <= hi):
            th = OverlapThresholds(support=hi, partial=lo)
            pred = [overlap_label(s, th) for _, s in scored]
            f1 = metrics.macro_f1(metrics.confusion(gold, pred, LABELS))
            if best is None or f1 > best[0]:
                best = (f1, th)
    assert best is not None
    return best[1]


def lexical_predictions(records: Sequence[Record], th: OverlapThresholds) -> list[list[Label]]:
    return [[overlap_label(s, th) for s in overlaps(r)] for r in records]


def prior_predictions(
    records: Sequence[Record],
    predicted: Sequence[Sequence[Label] | None],
    th: OverlapThresholds,
    *,
    rule: PriorRule = "soften",
) -> list[list[Label] | None]:
    out: list[list[Label] | None] = []
    for rec, labels in zip(records, predicted, strict=True):
        if labels is None:
            out.append(None)
        else:
            out.append(
                [
                    with_prior(p, s, th, rule=rule)
                    for p, s in zip(labels, overlaps(rec), strict=True)
                ]
            )
    return out
