import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rubricate.stagewise.domain.ssgrpo import (
    group_advantages,
    stage_returns,
    validate_lambda,
    validate_scores,
)
from rubricate_client.constants import DEFAULT_LAMBDA
from rubricate_client.errors import DomainError

unit = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
score_rows = st.lists(st.lists(unit, min_size=4, max_size=4), min_size=2, max_size=16)
IDENTITY = [[1.0 if i == j else 0.0 for j in range(4)] for i in range(4)]


def test_default_lambda_returns_by_hand() -> None:
    r = [0.5, 1.0, 0.0, 0.25]
    (g,) = stage_returns([r])
    assert g[0] == pytest.approx(0.5 + 0.4 * 1.0 + 0.6 * 0.0 + 0.8 * 0.25)
    assert g[1] == pytest.approx(1.0 + 0.4 * 0.0 + 0.8 * 0.25)
    assert g[2] == pytest.approx(0.0 + 0.8 * 0.25)
    assert g[3] == pytest.approx(0.25)


def test_advantages_by_hand() -> None:
    a = group_advantages([[1.0] * 4, [0.0] * 4], eps=0.0)
    assert a == [[1.0] * 4, [-1.0] * 4]


@given(score_rows)
@settings(max_examples=200)
def test_per_stage_advantages_have_zero_mean(scores: list[list[float]]) -> None:
    adv = group_advantages(stage_returns(scores))
    for k in range(4):
        assert abs(sum(row[k] for row in adv) / len(adv)) < 1e-6


@given(score_rows)
def test_terminal_broadcast_equals_plain_grpo(scores: list[list[float]]) -> None:
    adv = group_advantages(stage_returns(scores, mode="terminal"))
    final = [row[3] for row in scores]
    mean = sum(final) / len(final)
    std = math.sqrt(sum((x - mean) ** 2 for x in final) / len(final))
    for row, x in zip(adv, final, strict=True):
        expected = (x - mean) / (std + 1e-6)
        assert all(v == pytest.approx(expected, abs=1e-6) for v in row)


@given(score_rows)
def test_identity_lambda_gives_stage_local_credit(scores: list[list[float]]) -> None:
    returns = stage_returns(scores, lam=IDENTITY)
    assert returns == [[pytest.approx(v) for v in row] for row in scores]
    # changing a later stage's score leaves earlier stages' returns untouched
    bumped = [[*row[:3], 1.0 - row[3]] for row in scores]
    assert [r[:3] for r in stage_returns(bumped, lam=IDENTITY)] == [r[:3] for r in returns]


@given(score_rows)
def test_downstream_credit_flows_only_backwards(scores: list[list[float]]) -> None:
    base = stage_returns(scores)
    changed = [[1.0 - row[0], *row[1:]] for row in scores]  # change the plan score only
    out = stage_returns(changed)
    for a, b in zip(base, out, strict=True):
        assert a[1:] == pytest.approx(b[1:])  # later stages do not see the plan score


def test_lambda_validation_names_the_entry() -> None:
    with pytest.raises(DomainError) as e:
        validate_lambda([[1, 0, 0], [0, 1, 0], [0, 0, 1]])
    assert e.value.field == "lambda"
    bad = [list(r) for r in DEFAULT_LAMBDA]
    bad[2][1] = 0.3
    with pytest.raises(DomainError) as e:
        validate_lambda(bad)
    assert e.value.field == "lambda[2][1]"
    bad = [list(r) for r in DEFAULT_LAMBDA]
    bad[1][1] = 0.9
    with pytest.raises(DomainError) as e:
        validate_lambda(bad)
    assert e.value.field == "lambda[1][1]"
    bad = [list(r) for r in DEFAULT_LAMBDA]
    bad[0][3] = float("nan")
    with pytest.raises(DomainError, match="finite"):
        validate_lambda(bad)


def test_score_validation() -> None:
    with pytest.raises(DomainError) as e:
        validate_scores([[0, 0, 0, 0], [0, 1.5, 0, 0]])
    assert e.value.field == "scores[1][1]"
    with pytest.raises(DomainError) as e:
        validate_scores([[0, 0, 0]])
    assert e.value.field == "scores[0]"
    with pytest.raises(DomainError):
        validate_scores([])


def test_single_rollout_group_has_zero_advantage() -> None:
    assert group_advantages(stage_returns([[0.3, 0.2, 0.9, 1.0]])) == [[0.0] * 4]
