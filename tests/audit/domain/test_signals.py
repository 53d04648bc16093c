import pytest

from rubricate.audit.domain.signals import (
    RubricPoint,
    agreement_drift,
    fitted_rise,
    gaming_candidates,
    pearson,
    step_means,
)


def test_fitted_rise_is_the_slope_times_the_span() -> None:
    assert fitted_rise([(0, 0.0), (1, 0.5), (2, 1.0)]) == pytest.approx(1.0)
    assert fitted_rise([(10, 1.0), (20, 1.0)]) == pytest.approx(0.0)
    assert fitted_rise([(3, 1.0), (3, 2.0)]) is None


def test_pearson_known_values_and_undefined_cases() -> None:
    assert pearson([1, 2, 3], [2, 4, 6]) == pytest.approx(1.0)
    assert pearson([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    # numpy.corrcoef([1, 2, 3, 4], [1, 3, 2, 4])[0, 1] = 0.8
    assert pearson([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(0.8)
    assert pearson([1, 2], [1, 2]) is None
    assert pearson([1, 1, 1], [1, 2, 3]) is None


def test_step_means_average_per_step_in_step_order() -> None:
    assert step_means([(2, 1.0), (1, 0.0), (2, 0.0)]) == [(1, 0.0), (2, 0.5)]


def _series(live: list[float], reference: list[float]) -> list[RubricPoint]:
    return [
        RubricPoint(step=s, live=a, reference=b)
        for s, (a, b) in enumerate(zip(live, reference, strict=True))
    ]


def test_a_rubric_the_live_judge_rewards_more_and_more_is_a_gaming_candidate() -> None:
    series = {
        "gamed": _series([0.5, 1.0, 1.5, 2.0], [0.5, 0.5, 0.6, 0.5]),
        "honest": _series([0.5, 1.0, 1.5, 2.0], [0.5, 1.0, 1.4, 1.9]),
        "flat": _series([1.0, 1.0, 1.1, 1.0], [1.0, 0.9, 1.0, 1.0]),
    }
    [candidate] = gaming_candidates(series)
    assert candidate.rubric_id == "gamed"
    assert candidate.steps == 4
    assert candidate.live_rise == pytest.approx(1.5)
    assert abs(candidate.reference_rise) < 0.1


def test_too_few_steps_are_not_judged() -> None:
    series = {"r": _series([0.0, 2.0], [0.0, 0.0])}
    assert gaming_candidates(series, min_steps=3) == []
    assert [c.rubric_id for c in gaming_candidates(series, min_steps=2)] == ["r"]


def test_agreement_drift_compares_the_first_and_last_steps() -> None:
    points = [(0, 0.9), (1, 0.9), (2, 0.9), (3, 0.6), (4, 0.5), (5, 0.4)]
    drift = agreement_drift(points, window=3)
    assert drift.first == pytest.approx(0.9)
    assert drift.last == pytest.approx(0.5)
    assert drift.drop == pytest.approx(0.4)
    short = agreement_drift([(0, 1.0), (1, 0.5), (2, 0.0)], window=3)
    assert short.first == 1.0 and short.last == 0.0
    assert agreement_drift([(0, 1.0)]).drop is None
