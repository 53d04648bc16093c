from collections.abc import Iterator

import pytest

from rubricate.reflections.domain.bank import (
    CLOSE_TAG,
    OPEN_TAG,
    BankEntry,
    inject,
    render_block,
    replaces,
)
from rubricate_client.errors import DomainError
from rubricate_client.windowing import batched, windowed_curriculum

ENTRY = BankEntry(
    question="Why was the Mars Climate Orbiter lost?",
    rubrics={
        "Pitfalls": ["Blaming one engineer."],
        "Critical Requirement": ["Name the unit mismatch."],
    },
    takeaways=["Trace failures to interfaces.", "Prefer primary reports."],
)
OTHER = BankEntry(
    question="What caused the Ariane 5 failure?",
    rubrics={"Critical Requirement": ["Name the overflow."]},
    takeaways=["Check reused code's assumptions."],
)


@pytest.mark.parametrize(
    ("new", "stored", "expected"),
    [
        (5, 4, True),
        (5, 5, True),
        (4, 5, False),
        (None, 5, True),
        (3, None, True),
        (None, None, True),
    ],
)
def test_a_newer_reflection_replaces_an_older_one(
    new: int | None, stored: int | None, expected: bool
) -> None:
    assert replaces(new_step=new, stored_step=stored) is expected


def test_within_block_holds_the_previous_attempt_before_the_question() -> None:
    block = render_block("within", [ENTRY])
    assert block.startswith(OPEN_TAG) and block.endswith(CLOSE_TAG)
    assert "## Your Previous Attempt on This Question:" in block
    assert "Similar Question" not in block
    # categories in the paper's order, whatever the stored order
    assert block.index("Critical Requirement:") < block.index("Pitfalls:")
    assert "- Name the unit mismatch." in block
    assert "### Takeaways:\n1. Trace failures to interfaces.\n2. Prefer primary reports." in block
    prompt = inject(block, "Why was the Mars Climate Orbiter lost?")
    assert prompt.endswith(f"{CLOSE_TAG}\n\nWhy was the Mars Climate Orbiter lost?")


def test_cross_block_numbers_each_similar_question() -> None:
    block = render_block("cross", [ENTRY, OTHER])
    assert "## Similar Question 1:\nWhy was the Mars Climate Orbiter lost?" in block
    assert "## Similar Question 2:\nWhat caused the Ariane 5 failure?" in block
    assert block.count("---") == 1
    assert "Previous Attempt" not in block


def test_nothing_retrieved_renders_nothing() -> None:
    assert render_block("cross", []) == ""
    assert inject("", "Q?") == "Q?"


def test_windowed_curriculum_replays_each_window_within_episode() -> None:
    steps = list(windowed_curriculum(["b1", "b2", "b3", "b4", "b5"], k=3))
    assert steps == [
        ("b1", "cross"),
        ("b2", "cross"),
        ("b3", "cross"),
        ("b1", "within"),
        ("b2", "within"),
        ("b3", "within"),
        ("b4", "cross"),
        ("b5", "cross"),
        ("b4", "within"),
        ("b5", "within"),
    ]


def test_curriculum_default_window_is_three_and_is_lazy() -> None:
    def endless() -> Iterator[int]:
        n = 0
        while True:
            n += 1
            yield n

    it = windowed_curriculum(endless())
    first = [next(it) for _ in range(6)]
    assert [m for _, m in first] == ["cross"] * 3 + ["within"] * 3
    assert [b for b, _ in first] == [1, 2, 3, 1, 2, 3]


def test_curriculum_rejects_a_bad_window() -> None:
    with pytest.raises(DomainError):
        list(windowed_curriculum([1], k=0))
    assert list(batched(range(5), size=2)) == [[0, 1], [2, 3], [4]]
