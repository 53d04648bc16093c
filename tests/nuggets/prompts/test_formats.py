import math

import pytest

from rubricate.llm.base import TokenLogprob
from rubricate.nuggets.domain.rewards import BINARY_LABELS
from rubricate.nuggets.prompts.formats import (
    FORMATS,
    LabelCountError,
    LabelFormat,
    LabelParseError,
    format_instruction,
    label_distributions,
    parse_labels,
    render,
)
from rubricate_client.schemas.nuggets import Label

LABELS3: list[Label] = ["support", "not_support", "partial_support"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_table5_format_round_trips(fmt: LabelFormat) -> None:
    text = render(LABELS3, fmt)
    parsed = parse_labels(text, expected=3)
    assert parsed.labels == LABELS3
    for (a, b), label in zip(parsed.spans, LABELS3, strict=True):
        assert text[a:b] == label


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_has_an_instruction_naming_the_count(fmt: LabelFormat) -> None:
    assert "exactly 4 labels" in format_instruction(fmt, n=4)


@pytest.mark.parametrize(
    ("text", "fmt"),
    [
        ('["support", "not_support", "partial_support"]', "json"),
        ('{"labels": ["support", "not_support", "partial_support"]}', "json"),
        ("support,not_support,partial_support", "csv"),
        ("['support', 'not_support', 'partial_support']", "python_list"),
        # Table 5 prints the YAML example without the first dash
        ("support\n- not_support\n- partial_support", "yaml"),
        ("- support\n- not_support\n- partial_support", "yaml"),
        ("* support\n* not_support\n* partial_support", "markdown"),
        (
            "<labels>\n<label>support</label>\n<label>not_support</label>\n"
            "<label>partial_support</label>\n</labels>",
            "xml",
        ),
        ("support\tnot_support\tpartial_support", "tsv"),
        # Table 5 prints the TSV and pipe examples with their separators lost
        ("support not_support partial_support", "tsv"),
        ("1. support\n2. not_support\n3. partial_support", "numbered"),
        ("1) support\n2) not_support\n3) partial_support", "numbered"),
        ("support, not_support, partial_support", "comma_space"),
        ("support | not_support | partial_support", "pipe"),
        ("support|not_support|partial_support", "pipe"),
    ],
)
def test_table5_examples_parse(text: str, fmt: str) -> None:
    parsed = parse_labels(text, expected=3)
    assert parsed.labels == LABELS3
    assert parsed.format == fmt


@pytest.mark.parametrize(
    "text",
    [
        '<reasoning>1 is stated; 2 is absent: not_support; 3 half.</reasoning>\n["support", '
        '"not_support", "partial_support"]',
        "<think>support? maybe</think>\nFinal answer: support, not_support, partial_support",
        '```json\n["support", "not_support", "partial_support"]\n```',
        "Labels:\n1. Supported\n2. Not supported\n3. Partially supported",
        "Nugget 1: support\nNugget 2: not support\nNugget 3: partial support",
        "**Final Answer:** support | not_support | partial_support",
    ],
)
def test_reasoning_fences_headers_and_spellings_are_tolerated(text: str) -> None:
    assert parse_labels(text, expected=3).labels == LABELS3


def test_a_single_label() -> None:
    assert parse_labels('["partial_support"]', expected=1).labels == ["partial_support"]
    assert parse_labels("not_support", expected=1).labels == ["not_support"]
    assert parse_labels("1. support", expected=1).labels == ["support"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_wrong_count_is_rejected_in_every_format(fmt: LabelFormat) -> None:
    with pytest.raises(LabelCountError) as info:
        parse_labels(render(LABELS3, fmt), expected=4)
    assert (info.value.expected, info.value.got) == (4, 3)
    with pytest.raises(LabelCountError):
        parse_labels(render(LABELS3, fmt), expected=2)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "I cannot decide.",
        '["support", "maybe"]',
        "<reasoning>never closed, support",
        "[1, 2]",
    ],
)
def test_unusable_replies_are_rejected(text: str) -> None:
    with pytest.raises(LabelParseError):
        parse_labels(text, expected=2)


def test_binary_mode_rejects_partial() -> None:
    assert parse_labels('["support"]', expected=1, allowed=BINARY_LABELS).labels == ["support"]
    with pytest.raises(LabelParseError, match="use only support, not_support"):
        parse_labels('["partial_support"]', expected=1, allowed=BINARY_LABELS)


def _lp(p: float) -> float:
    return math.log(p)


def test_label_distributions_read_the_label_token() -> None:
    text = '["support", "not_support"]'
    tokens = (
        TokenLogprob('["', 0.0),
        TokenLogprob(
            "support", _lp(0.6), {"support": _lp(0.6), "not": _lp(0.3), "partial": _lp(0.1)}
        ),
        TokenLogprob('",', 0.0),
        TokenLogprob(' "', 0.0),
        TokenLogprob(
            "not", _lp(0.5), {"not": _lp(0.5), "part": _lp(0.25), "s": _lp(0.2), "}": _lp(0.05)}
        ),
        TokenLogprob("_support", 0.0),
        TokenLogprob('"]', 0.0),
    )
    parsed = parse_labels(text, expected=2)
    first, second = label_distributions(text, parsed.spans, tokens)
    assert first == pytest.approx({"support": 0.6, "not_support": 0.3, "partial_support": 0.1})
    # the non-label alternative "}" is dropped and the rest renormalized
    assert second == pytest.approx(
        {"support": 0.2 / 0.95, "not_support": 0.5 / 0.95, "partial_support": 0.25 / 0.95}
    )


def test_label_distributions_inside_a_token_with_a_prefix() -> None:
    text = "1. support"
    tokens = (
        TokenLogprob("1", 0.0),
        TokenLogprob(".", 0.0),
        TokenLogprob(
            " support", _lp(0.7), {" support": _lp(0.7), " not": _lp(0.3), "not": _lp(0.5)}
        ),
    )
    parsed = parse_labels(text, expected=1)
    (dist,) = label_distributions(text, parsed.spans, tokens)
    # "not" (no space) does not share the token's leading space: not an alternative here
    assert dist == pytest.approx({"support": 0.7, "not_support": 0.3, "partial_support": 0.0})


def test_label_distributions_binary_and_unavailable() -> None:
    text = '["support"]'
    tokens = (
        TokenLogprob('["', 0.0),
        TokenLogprob(
            "support", _lp(0.8), {"support": _lp(0.8), "partial": _lp(0.1), "not": _lp(0.1)}
        ),
        TokenLogprob('"]', 0.0),
    )
    spans = parse_labels(text, expected=1).spans
    (dist,) = label_distributions(text, spans, tokens, allowed=BINARY_LABELS)
    assert dist == pytest.approx({"support": 0.8 / 0.9, "not_support": 0.1 / 0.9})
    assert label_distributions(text, spans, None) == [None]
    # tokens that do not spell the reply cannot be aligned
    assert label_distributions(text, spans, tokens[:2]) == [None]
