"""LabelCalibration: features, probabilities against hand-computed values, JSON round trip
and the errors a malformed calibration gets."""

import json
import math

import pytest

from rubricate.nuggets.domain.calibration import (
    FEATURES,
    MIN_PROBABILITY,
    LabelCalibration,
    features,
)
from rubricate_client.errors import DomainError

ZERO = (0.0, 0.0, 0.0, 0.0, 0.0)


def calibration(**rows: tuple[float, ...]) -> LabelCalibration:
    weights = {"support": ZERO, "partial_support": ZERO, "not_support": ZERO, **rows}
    return LabelCalibration(model="m", weights=weights)  # type: ignore[arg-type]


def test_features_are_renormalised_log_probabilities_then_overlap() -> None:
    f = features({"support": 0.2, "partial_support": 0.2, "not_support": 0.4}, 0.75)
    assert f == pytest.approx([math.log(0.25), math.log(0.25), math.log(0.5), 0.75])
    assert len(f) == len(FEATURES)


def test_a_missing_label_is_floored_not_minus_infinity() -> None:
    f = features({"support": 1.0}, 0.0)
    assert f[:3] == pytest.approx([0.0, math.log(MIN_PROBABILITY), math.log(MIN_PROBABILITY)])


def test_an_all_zero_distribution_is_an_error() -> None:
    with pytest.raises(DomainError, match="positive probability"):
        features({"support": 0.0}, 0.5)


def test_probabilities_by_hand() -> None:
    # score(support) = 1 + 2 * overlap, the others 0: with overlap 0.5, e^2 / (e^2 + 2)
    cal = calibration(support=(1.0, 0.0, 0.0, 0.0, 2.0))
    dist = {"support": 0.1, "partial_support": 0.1, "not_support": 0.8}
    probs = cal.probabilities(dist, 0.5)
    e2 = math.exp(2.0)
    assert probs["support"] == pytest.approx(e2 / (e2 + 2))
    assert probs["partial_support"] == pytest.approx(1 / (e2 + 2))
    assert math.fsum(probs.values()) == pytest.approx(1.0)
    assert cal.label(dist, 0.5) == "support"
    # with no overlap the support score is 1 > 0 still; a negative bias flips it
    assert calibration(support=(-1.0, 0, 0, 0, 2.0)).label(dist, 0.0) != "support"


def test_log_probability_weights_follow_the_raw_distribution() -> None:
    # weight 1 on a label's own log-probability: calibrated = raw
    cal = calibration(
        support=(0, 1.0, 0, 0, 0), partial_support=(0, 0, 1.0, 0, 0), not_support=(0, 0, 0, 1.0, 0)
    )
    dist = {"support": 0.2, "partial_support": 0.3, "not_support": 0.5}
    assert cal.probabilities(dist, 0.9) == pytest.approx(dist)


def test_json_round_trip() -> None:
    cal = LabelCalibration(
        model="qwen",
        weights={
            "support": (0.1, 0.2, 0.3, 0.4, 0.5),
            "partial_support": (1, 2, 3, 4, 5),
            "not_support": ZERO,
        },
        fitted_on="dev",
        cross_validated={"calibrated_macro_f1": 0.6},
        topics=("t1", "t2"),
    )
    again = LabelCalibration.loads(json.dumps(cal.to_json()))
    assert again == cal


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("[1]", "JSON object"),
        ("{", "not JSON"),
        ('{"model": "m"}', "not a nugget label calibration"),
        (
            '{"model": "m", "features": ["bias"], "weights": {}}',
            "features",
        ),
    ],
)
def test_malformed_calibrations_are_refused(raw: str, message: str) -> None:
    with pytest.raises(DomainError, match=message):
        LabelCalibration.loads(raw)


def test_rows_must_cover_every_label_with_the_right_length() -> None:
    with pytest.raises(DomainError, match="exactly"):
        LabelCalibration(model="m", weights={"support": ZERO})  # type: ignore[dict-item]
    with pytest.raises(DomainError, match="needs 5 numbers"):
        calibration(support=(1.0, 2.0))
    with pytest.raises(DomainError, match="non-finite"):
        calibration(support=(math.nan, 0, 0, 0, 0))
