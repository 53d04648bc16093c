"""The literal text every match of a regular expression must contain, as a cheap test that
skips a search that cannot succeed.

`required_text(pattern)` reads the compiled pattern's parse tree and returns a condition
over literal fragments: the fragments of a sequence must all occur, one alternative's
fragments must occur (`Any`), a repeat that may match nothing requires nothing, and anything
that is not a literal (classes, `.`, anchors, look-arounds, back-references) requires
nothing. `RequiredText.may_match(folded)` evaluates it with substring tests over
`fold(text)`.

It is sound: when `pattern.search(text)` finds a match, `may_match(fold(text))` is true, so a
search skipped because it is false would have found nothing. Fragments and text are compared
case-folded (`str.casefold`, with the Turkic dotted and dotless i folded to `i` as
`re.IGNORECASE` matches them), so every character `re.IGNORECASE` takes for a literal folds
to the same text as the literal (the ASCII letters' non-ASCII matches, the Kelvin sign and
long s, included; tests/core/test_required_text.py checks every literal of the judge markers
against every code point). Folding both sides only ever accepts more, so case-sensitive
patterns are covered too.

Used for the judge-addressing markers (`llm.prompt_text`): seventeen patterns over every
stage of every trajectory were a third of the verifier's CPU per rollout, and ordinary text
lacks the fragments of nearly all of them.
"""

import re
from dataclasses import dataclass
from re import _constants as sre  # type: ignore[attr-defined]  # the parser's opcodes
from re import _parser as sre_parse  # type: ignore[attr-defined]
from typing import Any, Final

_TURKIC_I: Final = str.maketrans({"\u0130": "i", "\u0131": "i"})


def fold(text: str) -> str:
    """`text` as `RequiredText.may_match` and the fragments read it: case-folded, with `İ`
    and `ı` as `i` (`re.IGNORECASE` matches them to `i`; `str.casefold` keeps them apart)."""
    return text.lower() if text.isascii() else text.translate(_TURKIC_I).casefold()


@dataclass(frozen=True)
class RequiredText:
    """A condition over literal fragments: all of `all_of` hold, each either a fragment (a
    `str`) or a `RequiredText` whose `any_of` alternatives hold one at least."""

    all_of: tuple["str | RequiredText", ...] = ()
    any_of: tuple["RequiredText", ...] | None = None

    def may_match(self, folded: str) -> bool:
        """False only when no match is possible in the text `folded` came from (`fold`)."""
        for part in self.all_of:
            if isinstance(part, str):
                if part not in folded:
                    return False
            elif not part.may_match(folded):
                return False
        return self.any_of is None or any(alt.may_match(folded) for alt in self.any_of)

    @property
    def requires_nothing(self) -> bool:
        return not self.all_of and self.any_of is None


NOTHING: Final = RequiredText()


def required_text(pattern: re.Pattern[str]) -> RequiredText:
    """What every match of `pattern` contains (see the module docstring)."""
    return _sequence(sre_parse.parse(pattern.pattern, pattern.flags))


def _sequence(items: Any) -> RequiredText:
    parts: list[str | RequiredText] = []
    run: list[str] = []

    def end_run() -> None:
        if run:
            parts.append("".join(run))
            run.clear()

    for op, av in items:
        if op is sre.LITERAL:
            run.append(fold(chr(av)))
            continue
        end_run()
        inner = _element(op, av)
        if not inner.requires_nothing:
            parts.append(inner)
    end_run()
    if len(parts) == 1 and isinstance(parts[0], RequiredText):
        return parts[0]
    return RequiredText(all_of=tuple(parts))


def _element(op: Any, av: Any) -> RequiredText:
    if op is sre.SUBPATTERN:
        return _sequence(av[-1])
    if op is sre.BRANCH:
        alternatives = [_sequence(branch) for branch in av[1]]
        if any(alt.requires_nothing for alt in alternatives):
            return NOTHING
        return RequiredText(any_of=tuple(alternatives))
    if op is sre.ATOMIC_GROUP:
        return _sequence(av)
    if op in (sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT):
        low, _high, body = av
        return _sequence(body) if low >= 1 else NOTHING
    return NOTHING
