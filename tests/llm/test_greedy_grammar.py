"""Prompt-lookup drafts of the greedy grammar path (`llm.greedy_grammar._Drafts`): what
follows the latest earlier occurrence of the last tokens. The decoding itself is tested on
the real model (tests/llm/test_embedded_qwen_real_model.py)."""

from rubricate.llm.greedy_grammar import DRAFT_MAX, _Drafts


def test_a_draft_is_what_followed_the_latest_earlier_occurrence_of_the_last_tokens() -> None:
    drafts = _Drafts([1, 2, 3, 4, 9, 1, 2, 5, 6])
    drafts.add(1)
    drafts.add(2)  # the history ends with 1, 2: last seen before followed by 5, 6, 1, 2
    assert drafts.draft(10) == [5, 6, 1, 2]
    assert drafts.draft(2) == [5, 6]  # no further than the room left


def test_no_draft_without_an_earlier_occurrence_or_room() -> None:
    drafts = _Drafts([1, 2, 3])
    drafts.add(7)
    assert drafts.draft(10) == []
    drafts.add(8)
    assert drafts.draft(10) == []
    drafts = _Drafts([4, 5, 6, 4])
    drafts.add(5)
    assert drafts.draft(0) == []


def test_a_draft_is_at_most_draft_max_tokens() -> None:
    history = list(range(50))
    drafts = _Drafts([*history, 0])
    drafts.add(1)
    assert drafts.draft(100) == history[2 : 2 + DRAFT_MAX]
