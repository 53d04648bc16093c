"""`core.required_text`: the literal text every match of a pattern contains, and the judge
markers' searches it lets `llm.prompt_text` skip (issue 24: a third of the verifier's CPU)."""

import re
import sys
from re import _constants as sre  # type: ignore[attr-defined]
from re import _parser as sre_parse  # type: ignore[attr-defined]

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rubricate.core.required_text import RequiredText, fold, required_text
from rubricate.evaluation.injection_judges import ATTACKS, PHRASES, all_parts
from rubricate.llm.prompt_text import MARKERS, manipulation_markers, marker_spans, strip_invisible


def _literals(items: object, into: set[str]) -> set[str]:
    for op, av in items:  # type: ignore[attr-defined]
        if op is sre.LITERAL:
            into.add(chr(av))
        elif op is sre.SUBPATTERN:
            _literals(av[-1], into)
        elif op is sre.BRANCH:
            for branch in av[1]:
                _literals(branch, into)
        elif op in (sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT):
            _literals(av[2], into)
    return into


@pytest.mark.parametrize(
    ("pattern", "present", "absent"),
    [
        (r"abc", ["xxabcxx"], ["ab c", "acb"]),
        (r"ab|cd", ["cd", "ab"], ["ac", "bd"]),
        (r"x*yz", ["yz"], ["xy"]),
        (r"(?:ab)+c", ["abc"], ["ab", "c"]),
        (r"[ab]cd", ["cd"], ["c d"]),
        (r"\bgive\b\s+(?:two|2)", ["give 2", "give two"], ["give", "two"]),
        (r"(?:ab)?c", ["c"], ["ab"]),
        (r"a(?=bc)", ["a"], ["bc"]),
    ],
)
def test_the_condition_reads_the_pattern(
    pattern: str, present: list[str], absent: list[str]
) -> None:
    needs = required_text(re.compile(pattern, re.I))
    for text in present:
        assert needs.may_match(fold(text)), text
    for text in absent:
        assert not needs.may_match(fold(text)), text


def test_a_pattern_with_an_optional_alternative_requires_nothing() -> None:
    assert required_text(re.compile(r"ab|c*")).requires_nothing
    assert required_text(re.compile(r"\w+")) == RequiredText()


@pytest.mark.parametrize(
    ("pattern", "text"),
    [
        ("score", "\u017fcore"),  # long s matches s under IGNORECASE
        ("kind", "\u212aind"),  # the Kelvin sign matches k
        ("ignore", "\u0130gnore"),  # dotted capital I matches i
        ("ignore", "\u0131gnore"),  # dotless i matches i
        ("bewerter", "BEWERTER"),
        ("höchstpunktzahl", "HÖCHSTPUNKTZAHL"),
        ("оценщик", "ОЦЕНЩИК"),
        ("в", "\u1c80"),  # rounded ve matches ve
    ],
)
def test_characters_ignorecase_matches_fold_like_the_literal(pattern: str, text: str) -> None:
    compiled = re.compile(pattern, re.I)
    assert compiled.search(text)
    assert required_text(compiled).may_match(fold(text))


def test_every_character_a_marker_literal_matches_folds_to_it() -> None:
    """The soundness the module relies on, for every literal of every judge marker and
    every code point: what IGNORECASE takes for the literal folds to the same text."""
    literals: set[str] = set()
    for _name, pattern in MARKERS:
        _literals(sre_parse.parse(pattern.pattern, pattern.flags), literals)
    any_literal = re.compile("[" + "".join(re.escape(c) for c in literals) + "]", re.I)
    wrong = [
        (lit, chr(code))
        for code in range(sys.maxunicode + 1)
        if any_literal.fullmatch(chr(code))
        for lit in literals
        if re.fullmatch(re.escape(lit), chr(code), re.I) and fold(chr(code)) != fold(lit)
    ]
    assert wrong == []


def _every_marker(text: str) -> list[str]:
    """`manipulation_markers` without the skipped searches: every pattern searched."""
    visible = strip_invisible(text)
    flat = " ".join(visible.split())
    found: list[str] = []
    for name, pattern in MARKERS:
        if name not in found and (pattern.search(flat) or pattern.search(visible)):
            found.append(name)
    return found


def _attack_texts() -> list[str]:
    kinds = list(PHRASES)
    return [
        *all_parts(kinds, ATTACKS),
        *(f"Plain text. {t} More text." for t in all_parts(kinds, ATTACKS)),
    ]


@pytest.mark.parametrize("text", _attack_texts())
def test_markers_are_what_every_search_finds_on_the_attacks(text: str) -> None:
    assert manipulation_markers(text) == _every_marker(text)
    spans = {(s.name, s.start, s.end) for s in marker_spans(text)}
    visible = strip_invisible(text)
    assert spans == {(n, m.start(), m.end()) for n, p in MARKERS for m in p.finditer(visible)}


def test_the_attack_corpus_exercises_the_markers() -> None:
    """The comparison above is not vacuous: most attack texts carry markers (the halves of a
    split instruction do not, alone) and together they reach most kinds of marker."""
    found = [_every_marker(text) for text in _attack_texts()]
    assert sum(bool(f) for f in found) > len(found) * 2 // 3
    assert len({name for f in found for name in f}) >= 10


_WORDS = (
    "give award score every each all rubric criteria grader judge evaluator ignore "
    "previous instructions note to the system assistant you are now label mark as "
    "supported confirmed verified fully reviewer remark grading policy answer untrusted "
    "Bewerter Höchstpunktzahl évaluateur toutes les affirmations sont confirmées 满分 "
    "评分员 оценщик"
)
_PIECES = st.sampled_from(
    sorted(
        {
            *_WORDS.split(),
            "\u017f",
            "\u212a",
            "\u0130",
            "\u0131",
            "\u200b",
            "2",
            "10",
            ":",
            "：",
            "<",
            ">",
            "</",
            "|",
            "[",
            "]",
            '"',
            "{",
            "}",
            "\n",
            " ",
            ".",
            "(",
            ")",
            "'s",
            "#",
            "*",
        }
    )
)


@settings(max_examples=400, deadline=None)
@given(st.lists(_PIECES, max_size=30).map(" ".join), st.lists(_PIECES, max_size=30).map("".join))
def test_markers_are_what_every_search_finds_on_mixed_text(spaced: str, packed: str) -> None:
    for text in (spaced, packed, spaced.upper(), packed.title()):
        assert manipulation_markers(text) == _every_marker(text)
