"""Metric functions against confusion matrices computed by hand."""

import pytest

from rubricate.evaluation.metrics import (
    accuracy,
    bootstrap_by_group,
    cohen_kappa,
    collapse,
    confusion,
    macro_f1,
    per_label,
    report,
)

S, P, N = "support", "partial_support", "not_support"
LABELS = (S, P, N)
# rows gold, columns predicted (S, P, N)
M = [
    [5, 2, 3],
    [1, 2, 1],
    [2, 1, 8],
]


def pairs_of(matrix: list[list[int]]) -> tuple[list[str], list[str]]:
    gold, pred = [], []
    for i, row in enumerate(matrix):
        for j, count in enumerate(row):
            gold += [LABELS[i]] * count
            pred += [LABELS[j]] * count
    return gold, pred


def test_confusion_from_pairs() -> None:
    gold, pred = pairs_of(M)
    assert confusion(gold, pred, LABELS) == M
    with pytest.raises(ValueError):
        confusion(gold, pred[:-1], LABELS)


def test_accuracy_f1_and_macro_by_hand() -> None:
    assert accuracy(M) == pytest.approx(15 / 25)
    s, p, n = per_label(M)
    assert (s.precision, s.recall, s.f1, s.support) == pytest.approx((5 / 8, 5 / 10, 5 / 9, 10))
    assert (p.precision, p.recall, p.f1, p.support) == pytest.approx((2 / 5, 2 / 4, 4 / 9, 4))
    assert (n.precision, n.recall, n.f1, n.support) == pytest.approx((8 / 12, 8 / 11, 16 / 23, 11))
    assert macro_f1(M) == pytest.approx(13 / 23)


def test_kappa_by_hand() -> None:
    p_e = (10 * 8 + 4 * 5 + 11 * 12) / 625
    assert cohen_kappa(M) == pytest.approx((0.6 - p_e) / (1 - p_e))
    assert cohen_kappa([[3, 0], [0, 2]]) == 1.0
    assert cohen_kappa([[4, 0], [0, 0]]) == 1.0  # one label throughout, full agreement
    assert cohen_kappa([[0, 2], [2, 0]]) == pytest.approx(-1.0)
    assert cohen_kappa([[0, 0], [0, 0]]) == 0.0


def test_supported_vs_not_collapse_by_hand() -> None:
    binary = collapse(M, ((0, 1), (2,)))
    assert binary == [[10, 4], [3, 8]]
    assert accuracy(binary) == pytest.approx(18 / 25)
    assert macro_f1(binary) == pytest.approx((20 / 27 + 16 / 23) / 2)


def test_a_label_never_seen_counts_as_zero_f1_in_the_macro() -> None:
    m = [[3, 0, 0], [0, 0, 0], [0, 0, 1]]
    assert per_label(m)[1].f1 == 0.0
    assert macro_f1(m) == pytest.approx(2 / 3)


def test_bootstrap_by_topic_brackets_the_point_estimate_and_is_seeded() -> None:
    gold, pred = pairs_of(M)
    pairs = list(zip(gold, pred, strict=True))
    topics = [pairs[i::5] for i in range(5)]
    ci = bootstrap_by_group(topics, LABELS, accuracy, reps=400, seed=1)
    assert ci.low <= 0.6 <= ci.high and ci.low < ci.high
    assert bootstrap_by_group(topics, LABELS, accuracy, reps=400, seed=1) == ci
    perfect = [[(S, S), (N, N)], [(P, P)]]
    assert bootstrap_by_group(perfect, LABELS, accuracy, reps=50) == (
        bootstrap_by_group(perfect, LABELS, accuracy, reps=50)
    )
    assert bootstrap_by_group(perfect, LABELS, accuracy, reps=50).low == 1.0


def test_report_is_plain_data() -> None:
    gold, pred = pairs_of(M)
    out = report(gold, pred, LABELS)
    assert out["pairs"] == 25
    assert out["confusion"] == {"labels": list(LABELS), "matrix": M}
    assert out["per_label"][S]["f1"] == pytest.approx(5 / 9)  # type: ignore[index]
