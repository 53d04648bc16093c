"""Rankings, Spearman, Borda and the listwise rubric reward (Co-ReAct §3.1, §3.2, App. A)."""

import json
import math

import pytest

from rubricate.steps.domain.listwise import (
    atomicity,
    borda_consensus,
    borda_points,
    format_score,
    group_advantages,
    is_atomic,
    judge_order,
    judge_seed,
    labels_to_tiers,
    neutral_labels,
    parse_rubric_text,
    ranks_from_tiers,
    repetition_rate,
    rubric_reward,
    spearman,
    tiers_from_scores,
    to_tiers,
)
from rubricate_client.constants import LISTWISE_WEIGHTS, REPETITION_MAX_RATE
from rubricate_client.errors import DomainError


def test_ranks_average_ties() -> None:
    assert ranks_from_tiers([[2], [0, 3], [1]], n=4) == [2.5, 4.0, 1.0, 2.5]
    assert ranks_from_tiers([[0, 1, 2, 3]], n=4) == [2.5] * 4


def test_tiers_from_scores_tie_equal_scores() -> None:
    assert tiers_from_scores([0.5, 1.0, 0.5, 0.0]) == [[1], [0, 2], [3]]


def test_spearman_without_ties_matches_the_d_squared_formula() -> None:
    a, b = [1.0, 2.0, 3.0, 4.0], [2.0, 1.0, 4.0, 3.0]
    d2 = sum((x - y) ** 2 for x, y in zip(a, b, strict=True))
    assert spearman(a, b) == pytest.approx(1 - 6 * d2 / (4 * 15)) == pytest.approx(0.6)
    assert spearman(a, a) == pytest.approx(1.0)
    assert spearman(a, a[::-1]) == pytest.approx(-1.0)


def test_spearman_with_ties_by_hand() -> None:
    # ranks [1, 2.5, 2.5, 4] vs [1, 2, 3, 4]: cov 4.5, variances 4.5 and 5 → 3/√10
    assert spearman([1, 2.5, 2.5, 4], [1, 2, 3, 4]) == pytest.approx(3 / math.sqrt(10))
    # [2, 2, 2, 4] vs [1, 2, 3, 4]: cov 3, variances 3 and 5 → 3/√15
    assert spearman([2, 2, 2, 4], [1, 2, 3, 4]) == pytest.approx(3 / math.sqrt(15))
    # ties on both sides: deviations [-1, -1, 1, 1] and [-1.5, 0, 0, 1.5]: cov 3,
    # variances 4 and 4.5 → 3/√18 = 1/√2
    assert spearman([1.5, 1.5, 3.5, 3.5], [1, 2.5, 2.5, 4]) == pytest.approx(1 / math.sqrt(2))


def test_a_flat_ranking_carries_no_order() -> None:
    # all tied: ρ = 0, r_rank = 0.5 (chance), not the 0.5 ρ the d² formula would give
    assert spearman([2.5] * 4, [1, 2, 3, 4]) == 0.0


def test_borda_by_hand_with_ties() -> None:
    judges = [
        [[0], [1], [2], [3]],  # points 3, 2, 1, 0
        [[1], [0, 2], [3]],  # 1: 3; 0 and 2 share positions 2 and 3: 1.5 each; 3: 0
        [[2], [0], [1], [3]],  # 2: 3, 0: 2, 1: 1, 3: 0
    ]
    assert borda_points(judges, n=4) == [6.5, 6.0, 5.5, 0.0]
    consensus, points = borda_consensus(judges, n=4)
    assert consensus == [[0], [1], [2], [3]] and points == [6.5, 6.0, 5.5, 0.0]


def test_borda_consensus_keeps_ties() -> None:
    consensus, points = borda_consensus([[[0], [1], [2], [3]], [[1], [0], [3], [2]]], n=4)
    assert points == [5.0, 5.0, 1.0, 1.0]
    assert consensus == [[0, 1], [2, 3]]


def test_to_tiers_validates_a_ranking() -> None:
    assert to_tiers([2, [0, 3], 1], n=4, field="r") == [[2], [0, 3], [1]]
    for bad, where in (([0, 1, 2], "r"), ([0, 1, 2, 2], "r[3]"), ([0, 1, 2, 9], "r[3]")):
        with pytest.raises(DomainError) as err:
            to_tiers(bad, n=4, field="r")
        assert err.value.field == where
    with pytest.raises(DomainError):
        to_tiers([0, [], 1], n=2, field="r")


def test_neutral_relabelling_round_trip() -> None:
    assert neutral_labels(4) == ["X", "Y", "Z", "W"]
    order = judge_order(4, seed=judge_seed(7, 1))
    assert sorted(order) == [0, 1, 2, 3]
    assert judge_order(4, seed=judge_seed(7, 1)) == order  # reproducible
    labels = neutral_labels(4)
    # the judge ranks the labels in shown order: best is the first shown candidate
    assert labels_to_tiers(labels, order=order) == [[i] for i in order]
    with pytest.raises(ValueError):
        labels_to_tiers(["X", "X", "Z", "W"], order=order)
    with pytest.raises(ValueError):
        neutral_labels(40)


def _rubric(*criteria: str, weight: float = 1) -> str:
    return json.dumps({"criteria": [{"criterion": c, "weight": weight} for c in criteria]})


def test_format_term() -> None:
    strict = _rubric("Searches the NASA report", "Names the contractor")
    assert format_score(parse_rubric_text(strict), k=None) == 1.0
    assert format_score(parse_rubric_text(strict), k=2) == 1.0
    assert format_score(parse_rubric_text(strict), k=3) == 0.5
    fenced = f"Here is the rubric:\n```json\n{strict}\n```"
    parsed = parse_rubric_text(fenced)
    assert parsed is not None and not parsed.strict
    assert format_score(parsed, k=None) == 0.5
    assert format_score(parse_rubric_text(strict[:-2] + ",]}"), k=None) == 0.5
    for bad in (
        "search better",
        '{"criteria": []}',
        '{"criteria": [{"criterion": "x", "weight": 0}]}',
        '{"criteria": [{"criterion": "x", "weight": true}]}',
        '{"criteria": [{"text": "x", "weight": 1}]}',
    ):
        assert parse_rubric_text(bad) is None
        assert format_score(parse_rubric_text(bad), k=None) == 0.0


def test_atomicity_term() -> None:
    assert is_atomic("Searches for the 1999 NASA investigation report")
    assert not is_atomic("Searches the report and names the contractor")
    assert not is_atomic("Uses a date; cites a source")
    assert not is_atomic("Searches the report. Then it checks the date.")
    assert not is_atomic(" ".join(["word"] * 26))
    assert atomicity(["Targets the mishap report", "Checks units and dates"]) == 0.5
    assert atomicity([]) == 0.0


def test_repetition_rate_by_hand() -> None:
    # 4-grams: abcd, abcd, efgh, wxyz, abcd → 5 total, 3 unique → 0.4 (not above the gate)
    texts = ["a b c d", "a b c d", "e f g h", "w x y z", "a b c d"]
    assert repetition_rate(texts) == pytest.approx(0.4)
    assert repetition_rate([*texts, "A B C D"]) == pytest.approx(0.5)  # case-insensitive
    assert repetition_rate(["short one", ""]) == 0.0
    # n-grams do not cross criteria: "c d a b" is not formed
    assert repetition_rate(["a b c d", "a b c d"]) == pytest.approx(0.5)


def test_repetition_gate_zeroes_the_reward() -> None:
    assert REPETITION_MAX_RATE == 0.40
    at_gate = rubric_reward(rho=1.0, r_atom=1.0, r_fmt=1.0, repetition=0.40)
    assert not at_gate.gated and at_gate.total == pytest.approx(1.0)
    over = rubric_reward(rho=1.0, r_atom=1.0, r_fmt=1.0, repetition=0.41)
    assert over.gated and over.total == 0.0
    repeated = ["Search the census data for 2020"] * 3
    assert repetition_rate(repeated) > REPETITION_MAX_RATE


def test_total_reward_weights() -> None:
    assert LISTWISE_WEIGHTS == (0.75, 0.15, 0.10)
    reward = rubric_reward(rho=0.6, r_atom=1.0, r_fmt=0.5, repetition=0.0)
    assert reward.r_rank == pytest.approx(0.8)
    assert reward.total == pytest.approx(0.75 * 0.8 + 0.15 + 0.05)
    anti = rubric_reward(rho=-1.0, r_atom=0.0, r_fmt=0.0, repetition=0.0)
    assert anti.total == 0.0
    unparseable = rubric_reward(rho=None, r_atom=0.0, r_fmt=0.0, repetition=0.0)
    assert unparseable.r_rank == 0.0 and unparseable.total == 0.0


def test_group_advantages() -> None:
    adv = group_advantages([1.0, 0.0, 0.5, 0.5])
    assert sum(adv) == pytest.approx(0.0)
    assert adv[0] == pytest.approx(0.5 / (math.sqrt(0.125) + 1e-6))
    assert group_advantages([0.3, 0.3]) == [0.0, 0.0]
    assert group_advantages([]) == []
