from hypothesis import given
from hypothesis import strategies as st

from rubricate.mining.domain.passages import (
    PASSAGE_MAX_SENTENCES,
    PASSAGE_MIN_SENTENCES,
    pack_sentences,
    segment_passages,
    split_sentences,
)


def test_sentences_split_at_terminal_punctuation_not_at_abbreviations() -> None:
    text = (
        "The json module encodes objects, e.g. dicts and lists. It was added in 2.6! "
        "Does it decode too? Yes. Dr. Smith wrote J. R. R. notes."
    )
    assert split_sentences(text) == [
        "The json module encodes objects, e.g. dicts and lists.",
        "It was added in 2.6!",
        "Does it decode too?",
        "Yes.",
        "Dr. Smith wrote J. R. R. notes.",
    ]


def test_paragraphs_never_share_a_sentence_and_wordless_fragments_are_dropped() -> None:
    text = "Heading without a stop\n\nFirst sentence. second word lower.\n\n---\n\n42"
    assert split_sentences(text) == [
        "Heading without a stop",
        "First sentence. second word lower.",
    ]


def test_packing_is_balanced() -> None:
    sentences = [f"S{i}." for i in range(23)]
    groups = pack_sentences(sentences)
    assert [len(g) for g in groups] == [8, 8, 7]
    assert [s for g in groups for s in g] == sentences


def test_short_documents_are_one_short_passage() -> None:
    assert pack_sentences(["One.", "Two."]) == [["One.", "Two."]]
    assert pack_sentences([]) == []


@given(st.integers(min_value=PASSAGE_MIN_SENTENCES, max_value=400))
def test_every_passage_has_five_to_ten_sentences(n: int) -> None:
    groups = pack_sentences([f"Sentence {i}." for i in range(n)])
    assert all(PASSAGE_MIN_SENTENCES <= len(g) <= PASSAGE_MAX_SENTENCES for g in groups)
    assert sum(len(g) for g in groups) == n


def test_segment_passages_joins_sentences() -> None:
    text = " ".join(f"Fact number {i} is stated here." for i in range(12))
    passages = segment_passages(text)
    assert len(passages) == 2
    assert passages[0].startswith("Fact number 0 is stated here. Fact number 1")
    assert all(len(split_sentences(p)) == 6 for p in passages)
