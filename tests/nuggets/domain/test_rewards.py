import itertools

import pytest

from rubricate.nuggets.domain.rewards import (
    IMPORTANCE_WEIGHTS,
    LABEL_VALUES,
    Pooled,
    exact_match,
    expected_value,
    label_reward,
    max_pool,
    normalize_answer,
    reward,
    soft_max_pool,
    split_blocks,
    whole_block,
)
from rubricate_client.errors import DomainError
from rubricate_client.schemas.nuggets import Label


def test_paper_values_and_weights() -> None:
    assert LABEL_VALUES == {"support": 1.0, "partial_support": 0.5, "not_support": 0.0}
    assert IMPORTANCE_WEIGHTS == {"vital": 1.0, "okay": 0.5}


def test_blocks_are_paragraphs_with_offsets() -> None:
    answer = "  First para\nstill first.\n\n\n  Second one.  \n \t\nThird\n"
    blocks = split_blocks(answer)
    assert [b.text for b in blocks] == ["First para\nstill first.", "Second one.", "Third"]
    for b in blocks:
        assert answer[b.start : b.end] == b.text
    assert [b.index for b in blocks] == [0, 1, 2]


def test_single_newlines_do_not_split_and_blank_answers_have_no_blocks() -> None:
    assert len(split_blocks("a\nb\nc")) == 1
    assert split_blocks("") == []
    assert split_blocks(" \n\n \n") == []
    assert whole_block("  \n ") == []
    (only,) = whole_block("  x\n\ny ")
    assert only.text == "x\n\ny" and (only.start, only.end) == (2, 6)


def test_windows_line_endings_split() -> None:
    assert [b.text for b in split_blocks("a\r\n\r\nb")] == ["a", "b"]


def test_many_paragraphs_are_packed_into_max_blocks_in_order() -> None:
    paras = [f"p{i} " + "x" * (10 * (i % 3 + 1)) for i in range(10)]
    answer = "\n\n".join(paras)
    blocks = split_blocks(answer, max_blocks=4)
    assert len(blocks) == 4
    joined = " ".join(b.text for b in blocks)
    assert [w for w in joined.split() if w.startswith("p")] == [f"p{i}" for i in range(10)]
    assert blocks[0].start == 0 and blocks[-1].end == len(answer)
    for a, b in itertools.pairwise(blocks):
        assert a.end < b.start
    assert len(split_blocks(answer, max_blocks=10)) == 10
    assert len(split_blocks(answer, max_blocks=1)) == 1
    with pytest.raises(DomainError):
        split_blocks(answer, max_blocks=0)


def test_max_pool_keeps_the_first_best_block() -> None:
    pooled = max_pool(
        [
            ["not_support", "partial_support", "not_support", "partial_support"],
            ["partial_support", "support", "not_support", "partial_support"],
            ["support", "support", "not_support", "not_support"],
        ],
        n_nuggets=4,
    )
    assert pooled == [
        Pooled("support", 2),
        Pooled("support", 1),
        Pooled("not_support", None),
        Pooled("partial_support", 0),
    ]


def test_max_pool_without_blocks_supports_nothing_and_checks_shapes() -> None:
    assert max_pool([], n_nuggets=2) == [Pooled("not_support", None)] * 2
    with pytest.raises(ValueError):
        max_pool([["support"]], n_nuggets=2)


def test_reward_formula_by_hand() -> None:
    # vital support 1·1, vital partial 1·0.5, okay support 0.5·1, okay not 0.5·0
    r = label_reward(
        ["support", "partial_support", "support", "not_support"],
        ["vital", "vital", "okay", "okay"],
    )
    assert r == pytest.approx((1 + 0.5 + 0.5 + 0) / (1 + 1 + 0.5 + 0.5))
    assert label_reward(["not_support"], ["okay"]) == 0.0
    assert label_reward(["support"], ["okay"]) == 1.0
    with pytest.raises(DomainError):
        reward([], [])
    with pytest.raises(ValueError):
        reward([1.0], [1.0, 0.5])


def test_soft_pool_takes_the_block_with_the_highest_expected_value() -> None:
    a: dict[Label, float] = {"support": 0.2, "partial_support": 0.2, "not_support": 0.6}
    b: dict[Label, float] = {"support": 0.5, "partial_support": 0.0, "not_support": 0.5}
    assert expected_value(a) == pytest.approx(0.3)
    (pooled,) = soft_max_pool([[a], [b]], n_nuggets=1)
    assert pooled is not None
    assert pooled.block == 1 and pooled.expected_value == pytest.approx(0.5)
    assert soft_max_pool([[a], [None]], n_nuggets=1) == [None]


@pytest.mark.parametrize(
    ("prediction", "truth", "expected"),
    [
        ("The Eiffel Tower.", "eiffel tower", True),
        ("<think>hmm</think><answer> United States </answer>", "United States", True),
        ("  Merchant Taylors' School ", "Merchant Taylors School", True),
        ("Merchant Taylors' School", "Merchant Taylors' School (MTS)", False),
        ("United States", "American", False),
        ("", "", False),
    ],
)
def test_exact_match_is_normalized(prediction: str, truth: str, expected: bool) -> None:
    assert exact_match(prediction, truth) is expected


def test_normalize_answer() -> None:
    assert normalize_answer("  The  QUICK, brown fox!") == "quick brown fox"
