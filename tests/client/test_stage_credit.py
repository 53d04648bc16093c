"""The stage-credit rules the TRL trainer and the veRL estimator share
(`rubricate_client.stagecredit`): the switch and Λ, which samples get per-stage credit, and
how per-stage advantages become per-token advantages."""

import pytest

from rubricate_client.constants import DEFAULT_LAMBDA
from rubricate_client.ssgrpo import stage_advantages, stage_returns
from rubricate_client.stagecredit import (
    STAGE_CREDIT_ENV,
    STAGE_LAMBDA_ENV,
    StageCredit,
    credit_row,
    group_advantages,
    increments,
    parse_lambda,
    parse_switch,
    per_token,
)

FULL_LOGS = {"scored": 1.0, "fallback": 0.0, "R_plan": 1.0, "R_research": 0.5}
FULL_LOGS |= {"R_review": 0.25, "R_answer": 0.75}


def test_lambda_paper_discount_and_matrix() -> None:
    assert parse_lambda(None) == parse_lambda("paper") == DEFAULT_LAMBDA
    assert parse_lambda(0.5) == parse_lambda("0.5")
    assert parse_lambda(0.5)[0] == (1.0, 0.5, 0.25, 0.125)
    assert parse_lambda(0.5)[2] == (0.0, 0.0, 1.0, 0.5)
    assert parse_lambda(0)[1] == (0.0, 1.0, 0.0, 0.0)  # each stage its own score only
    identity = [[1.0 if j == k else 0.0 for j in range(4)] for k in range(4)]
    assert parse_lambda(str(identity)) == tuple(tuple(r) for r in identity)


@pytest.mark.parametrize(
    "bad",
    [
        1.5,
        -0.1,
        "nonsense",
        [[1.0, 0.0], [0.0, 1.0]],
        [[1, 0, 0, 0], [0.5, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]],  # not causal
        [[2, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]],  # diagonal not 1
    ],
)
def test_lambda_refuses_what_is_not_a_stage_matrix(bad: object) -> None:
    with pytest.raises(ValueError):
        parse_lambda(bad)


def test_switch_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert parse_switch(None) is True
    assert parse_switch("off") is False and parse_switch("ON") is True
    assert parse_switch(False) is False
    with pytest.raises(ValueError):
        parse_switch("maybe")
    monkeypatch.setenv(STAGE_CREDIT_ENV, "off")
    monkeypatch.setenv(STAGE_LAMBDA_ENV, "0.5")
    credit = StageCredit.from_env()
    assert credit.enabled is False and credit.lam == parse_lambda(0.5)
    assert StageCredit.from_env(enabled=True, lam="paper") == StageCredit()
    assert "off" in credit.describe("X") and "GRPO on R_answer" in credit.describe("X")
    assert "on (X)" in StageCredit().describe("X") and "paper" in StageCredit().describe("X")


def test_which_samples_get_per_stage_credit() -> None:
    ends = [3, 7, 9, 12]
    assert credit_row(FULL_LOGS, ends, scored_reward=0.75) == [1.0, 0.5, 0.25, 0.75]
    # a stage not found in the tokens, or found out of order: answer only
    assert credit_row(FULL_LOGS, [3, 7, -1, 12], scored_reward=0.75) == [None] * 3 + [0.75]
    assert credit_row(FULL_LOGS, [3, 3, 9, 12], scored_reward=0.75) == [None] * 3 + [0.75]
    # the judge's answer-only fallback: answer only, with the reward (R_answer)
    fallback = FULL_LOGS | {"fallback": 1.0}
    assert credit_row(fallback, ends, scored_reward=0.5) == [None] * 3 + [0.5]
    # unscored: no row at all (out of every stage's statistics), never a 0
    assert credit_row(FULL_LOGS | {"scored": 0.0}, ends, scored_reward=0.0) == [None] * 4
    assert credit_row(FULL_LOGS, ends, scored_reward=None) == [None] * 4


def test_per_token_gives_each_stage_its_advantage() -> None:
    adv = [1.0, 2.0, 3.0, 4.0]
    # stage k runs from after stage k-1's last token to its own; the answer to the end
    assert per_token(adv, [1, 3, 4, 5], 8) == [1, 1, 2, 2, 3, 4, 4, 4]
    # answer only: every token the answer's advantage
    assert per_token([None, None, None, 4.0], [-1, -1, -1, 5], 6) == [4.0] * 6
    # unscored: the default (0) everywhere
    assert per_token([None] * 4, [1, 3, 4, 5], 6) == [0.0] * 6
    # a missing middle stage: its tokens go to the next stage present
    assert per_token([1.0, None, 3.0, 4.0], [1, -1, 4, 5], 6) == [1, 1, 3, 3, 3, 4]


def test_group_advantages_are_ss_grpo() -> None:
    rows: list[list[float | None]] = [
        [1.0, 1.0, 1.0, 1.0],
        [0.0, 0.5, 0.0, 0.0],
        [None, None, None, 0.5],
        [None] * 4,
    ]
    expected = stage_advantages(stage_returns(rows, lam=DEFAULT_LAMBDA))
    assert group_advantages(rows, lam=DEFAULT_LAMBDA) == expected
    assert expected[3] == [None] * 4 and expected[2][:3] == [None] * 3
    centred = group_advantages(rows, lam=DEFAULT_LAMBDA, scale=False)
    assert centred == stage_advantages(stage_returns(rows, lam=DEFAULT_LAMBDA), scale=False)
    # Λ matters: with a discount of 0 each stage's return is its own score
    own = group_advantages(rows, lam=parse_lambda(0))
    assert own[1][1] == pytest.approx(-own[0][1]) and own[0][0] == pytest.approx(1.0, abs=1e-5)
    assert group_advantages([[0.5, 0.5, 0.5, 0.5]], lam=DEFAULT_LAMBDA) == [[0.0] * 4]


def test_increments_sum_to_the_answer_and_give_back_every_stage() -> None:
    scores = [0.25, 1.0, 0.5, 0.75]
    steps = increments(scores)
    assert sum(steps) == pytest.approx(0.75)
    assert [sum(steps[: k + 1]) for k in range(4)] == pytest.approx(scores)
