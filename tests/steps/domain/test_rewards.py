"""Step rubrics, verification and ARCO's step-reward decomposition."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rubricate.steps.domain.rewards import (
    Criterion,
    Verdict,
    decompose_outcome,
    make_rubric,
    normalize_weights,
    passes,
    render_rubric,
    retry_feedback,
    weighted_fraction,
)
from rubricate_client.constants import STEP_PASS_THRESHOLD
from rubricate_client.errors import DomainError


def test_weights_are_normalized_to_sum_one() -> None:
    assert normalize_weights([3, 2, 1]) == pytest.approx([0.5, 1 / 3, 1 / 6])
    assert normalize_weights([0.2]) == [1.0]
    assert math.fsum(normalize_weights([1e-3, 7.0, 2.5, 0.25])) == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("weights", "field"),
    [([], "w"), ([1.0, 0.0], "w[1]"), ([-1.0], "w[0]"), ([math.nan], "w[0]"), ([math.inf], "w[0]")],
)
def test_bad_weights_are_rejected_with_their_field(weights: list[float], field: str) -> None:
    with pytest.raises(DomainError) as err:
        normalize_weights(weights, field="w")
    assert err.value.field == field


def test_make_rubric_rejects_blank_criteria() -> None:
    with pytest.raises(DomainError) as err:
        make_rubric(["ok", "  "], [1, 1], field="rubric.criteria")
    assert err.value.field == "rubric.criteria[1].text"


def test_weighted_fraction_and_the_pass_threshold() -> None:
    rubric = make_rubric(["a", "b", "c"], [2, 1, 1])
    assert weighted_fraction(rubric, [True, False, False]) == 0.5
    assert weighted_fraction(rubric, [False, True, True]) == 0.5
    assert weighted_fraction(rubric, [False, True, False]) == 0.25
    assert weighted_fraction(rubric, [True, True, True]) == 1.0
    # τ = 0.5 and the rule is ≥: exactly half passes, just below fails
    assert STEP_PASS_THRESHOLD == 0.5
    assert passes(0.5, threshold=STEP_PASS_THRESHOLD)
    assert not passes(0.4999, threshold=STEP_PASS_THRESHOLD)
    assert passes(0.25, threshold=0.25) and not passes(0.25, threshold=0.3)


def test_feedback_names_only_the_failed_criteria() -> None:
    rubric = make_rubric(["Targets the 1999 report", "Names NASA", "Uses a date"], [1, 1, 1])
    verdicts = [Verdict(True, "yes"), Verdict(False, "no agency named"), Verdict(False, "")]
    feedback = retry_feedback(rubric, verdicts)
    assert feedback is not None
    assert "criterion 2: Names NASA (verifier: no agency named)" in feedback
    assert "criterion 3: Uses a date" in feedback
    assert "1999" not in feedback
    assert retry_feedback(rubric, [Verdict(True)] * 3) is None


def test_rendered_rubric_lists_criteria_with_weights() -> None:
    text = render_rubric([Criterion("Search the NASA report", 0.75), Criterion("Be brief", 0.25)])
    assert text.startswith("<step_rubric>") and text.endswith("</step_rubric>")
    assert "1. [weight 0.75] Search the NASA report" in text
    assert "2. [weight 0.25] Be brief" in text


def test_proportional_decomposition_by_hand() -> None:
    split = decompose_outcome(1.0, [1.0, 0.5, 0.5])
    assert split.method == "proportional"
    assert split.rewards == [0.5, 0.25, 0.25]
    assert split.shares == [0.5, 0.25, 0.25]


def test_a_step_with_all_zero_criteria_gets_zero() -> None:
    split = decompose_outcome(0.8, [0.0, 1.0, 0.0, 1.0])
    assert split.rewards[0] == 0.0 and split.rewards[2] == 0.0
    assert split.rewards[1] + split.rewards[3] == 0.8


def test_all_zero_steps_split_the_outcome_evenly_and_say_so() -> None:
    split = decompose_outcome(1.0, [0.0, 0.0, 0.0, 0.0])
    assert split.method == "uniform"
    assert split.rewards == [0.25] * 4


def test_zero_outcome_gives_zero_rewards() -> None:
    split = decompose_outcome(0.0, [1.0, 0.5])
    assert split.method == "zero_outcome" and split.rewards == [0.0, 0.0]
    assert split.shares == pytest.approx([2 / 3, 1 / 3])


def test_decomposition_rejects_bad_input() -> None:
    with pytest.raises(DomainError):
        decompose_outcome(1.0, [])
    with pytest.raises(DomainError) as err:
        decompose_outcome(1.0, [0.5, 1.5])
    assert err.value.field == "scores[1]"
    with pytest.raises(DomainError):
        decompose_outcome(math.inf, [0.5])


_OUTCOMES = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.floats(min_value=-1.0, max_value=1.0),
    st.sampled_from([1.0, 0.7, 0.1, -0.3, 5e-324, 1.7976931348623157e308]),
)
_SCORES = st.lists(
    st.one_of(st.floats(min_value=0.0, max_value=1.0), st.sampled_from([0.0, 1 / 3, 0.5, 1.0])),
    min_size=1,
    max_size=30,
)


@given(outcome=_OUTCOMES, scores=_SCORES)
def test_step_rewards_sum_exactly_to_the_outcome(outcome: float, scores: list[float]) -> None:
    split = decompose_outcome(outcome, scores)
    rewards = split.rewards
    # exact in every summation order a trainer might use
    assert sum(rewards) == outcome
    assert sum(reversed(rewards)) == outcome
    assert math.fsum(rewards) == outcome
    assert all(r == 0.0 or (r > 0) == (outcome > 0) for r in rewards)
    total = math.fsum(scores)
    shares = [q / total for q in scores] if total > 0 else [1 / len(scores)] * len(scores)
    for reward, share, q in zip(rewards, shares, scores, strict=True):
        # off the exact proportional value by less than one unit of the outcome's last bit
        slack = abs(outcome) * 2.0**-52 * (1 + 4 * share) + 5e-324
        assert abs(reward - outcome * share) <= slack
        if total > 0 and q == 0.0:
            assert reward == 0.0
    assert split.method == (
        "zero_outcome" if outcome == 0 else "proportional" if total > 0 else "uniform"
    )


def test_weights_whose_sum_overflows_are_a_domain_error() -> None:
    """Found by the schemathesis run: fsum raises OverflowError on huge finite weights."""
    from rubricate.steps.domain.rewards import normalize_weights
    from rubricate_client.errors import DomainError

    with pytest.raises(DomainError, match="too large"):
        normalize_weights([1e308, 1e308], field="rubric.criteria")
