"""What a criterion says an answer must say: the content words of the object of its verb of
saying (GitHub issue 32, rubric grounding).

A positive answer rubric such as "The answer describes a double helix of two strands" has
the shape *(the answer) (adverbs) VERB-OF-SAYING OBJECT*: it asks the answer to say OBJECT.
An answer none of whose assertions shares a single content word with OBJECT does not say
it, in any paraphrase, so the rubric cannot be met (`core.assertions.ungrounded`). The rule
is deliberately conservative, because a right answer that paraphrases must keep its score:

- only the *recognised shape* is grounded: a criterion whose verb is not one of saying ("is
  concise", "uses bullet points", "cites two sources", "avoids jargon": the form of the
  answer, met by text that shares no word with it) or that is a bare statement (a nugget
  sent as a rubric) yields nothing and is judged as before;
- OBJECT's words are counted without the rubric's own metalanguage (words for the text
  and its parts, its qualities, and the abstract nouns that name a *kind* of content:
  "explains the mechanism clearly"): a criterion whose object is only metalanguage yields
  nothing;
- one shared word anywhere in the assertions is enough, and words match on a five-letter
  prefix of their stems ("discoverers" ~ "discovered", "evaporation" ~ "evaporates").

Closed classes of grammar, not attack phrases; measured on right answers in
`evaluation.hacking_reading.rubric_grounding` (docs/judge-quality.md). Pure: no model, no I/O.
"""

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from rubricate.core.words import content_words

# the text as the subject of a criterion ("The answer", "A good reply", "It")
_SUBJECT = re.compile(
    r"^(?:(?:does|did|do)\s+)?(?:(?:the|this|a|an|your|its|their)\s+)?"
    r"(?:(?:final|good|ideal|complete|correct|strong|model|whole|overall)\s+)?"
    r"(?:answer|response|reply|output|solution|text|model|assistant|agent|author|writer|"
    r"stage|summary|essay)s?\s+|^it\s+",
    re.I,
)
# a modal or an auxiliary before the verb ("should mention", "must state", "needs to name")
_MODAL = re.compile(
    r"^(?:should|must|shall|will|would|can|could|does|do|did|needs?\s+to|has\s+to|have\s+to|"
    r"is\s+(?:expected|required)\s+to|ought\s+to)\s+",
    re.I,
)
# adverbs before the verb ("correctly identifies", "also notes", "explicitly states")
_ADVERB = re.compile(r"^(?:\w+ly|also|both|clearly|well|still|further|then)\s+", re.I)

_SAYING_TEXT: Final = (
    "say state mention name note explain describe identify give list specify discuss address "
    "cover include report indicate clarify define outline provide present acknowledge "
    "highlight emphasise emphasize stress recognise recognize attribute date place answer "
    "convey show demonstrate detail summarise summarize establish assert claim affirm "
    "confirm distinguish compare contrast relate link connect trace quantify estimate "
    "calculate compute derive conclude argue point refer touch spell make"
)
_SAYING: Final = frozenset(_SAYING_TEXT.split())
"""Verbs whose object is what the answer says (base forms; `_verb_base` folds 3sg/-ing)."""

# the rubric's frame: the text and its parts, its qualities, and the grammar of the object;
# never content, neither counted nor matched ("explains the answer clearly")
_FRAME_TEXT: Final = (
    # the text and its parts
    "answer response reply question text summary overview explanation description statement "
    "sentence paragraph section list detail example point source citation reference mention "
    "discussion aspect element part topic subject term way step item word phrase clause "
    "wording language tone format length justification rationale argument fact "
    # qualities of a text
    "correct accurate clear concise brief complete specific relevant precise explicit direct "
    "proper appropriate thorough detailed key main important major primary central essential "
    "basic general overall short long simple full whole right exact adequate sufficient "
    "valid reasonable plausible coherent consistent logical well "
    # grammar inside the object
    "correctly clearly briefly explicitly accurately also both either whether out up "
    "between among least every through across within without upon via given certain "
    "particular another such"
)
_FRAME: Final = frozenset(content_words(_FRAME_TEXT))
# nouns that name a kind of content ("explains the reason for the difference"): matched
# (an answer may well say "nature"), but not counted as what the criterion asks for
_GENERIC_TEXT: Final = (
    "reason cause mechanism process role significance importance impact effect consequence "
    "relationship difference similarity connection context background nature purpose "
    "outcome result factor feature characteristic type kind idea concept notion "
    "information evidence value number figure amount quantity date year time place "
    "location name person people thing one something anything two three four five six "
    "seven eight nine ten several many various multiple structure support history"
)
_GENERIC: Final = frozenset(content_words(_GENERIC_TEXT))
MIN_SPECIFIC: Final = 3
"""A criterion asks for at least this many specific words before it is grounded on them:
the fewer words it asks for, the likelier a right answer says them otherwise ("stress" ~
"pressures"); one that asks for three and shares none with the answer asks for something
else (measured in docs/judge-quality.md)."""

_PREFIX: Final = 5
"""Words match on this many letters of their stems (more lenient than the stems)."""


def _verb_base(word: str) -> str:
    """A verb's base form for the saying class: 3sg, -ing and -ed folded ("identifies" →
    "identify", "states" → "state", "describing" → "describe")."""
    w = word.lower()
    candidates = [w]
    if w.endswith("ies"):
        candidates.append(w[:-3] + "y")
    if w.endswith("es"):
        candidates.append(w[:-2])
    if w.endswith("s"):
        candidates.append(w[:-1])
    if w.endswith("ing"):
        candidates += [w[:-3], w[:-3] + "e"]
    if w.endswith("ed"):
        candidates += [w[:-2], w[:-1]]
    return next((c for c in candidates if c in _SAYING), "")


def _key(word: str) -> str:
    return word[:_PREFIX]


def keys(words: Iterable[str]) -> frozenset[str]:
    """Content words (`core.words.content_words`) as the keys they match on."""
    return frozenset(_key(w) for w in words)


@dataclass(frozen=True)
class Asked:
    """What a criterion asks an answer to say."""

    words: frozenset[str] = frozenset()
    """The content words (stemmed) of its object: what an assertion may share."""
    terms: int = 0
    """How many words of the object (a hyphenated compound is one: "pound-force") carry a
    specific content word, one that is not a kind of content ("reason", "nature")."""

    @property
    def groundable(self) -> bool:
        return self.terms >= MIN_SPECIFIC


def asked(criterion: str) -> Asked:
    """What `criterion` asks an answer to say: the content words of the object of its verb of
    saying, without the rubric's frame; nothing when it is not of that shape."""
    rest = criterion.strip().strip("\"'“”")
    for pattern in (_SUBJECT, _MODAL):
        rest = pattern.sub("", rest, count=1)
    while (m := _ADVERB.match(rest)) is not None and not _verb_base(m.group(0).strip()):
        rest = rest[m.end() :]
    verb = re.match(r"[A-Za-z]+", rest)
    if verb is None or not _verb_base(verb.group(0)):
        return Asked()
    kept: set[str] = set()
    terms = 0
    for token in rest[verb.end() :].split():
        words = {w for w in content_words(token) if len(w) >= 3 and not w.isdigit()}
        words -= _FRAME | {w for w in words if _verb_base(w) or _verb_base(w + "e")}
        kept |= words
        terms += bool(words - _GENERIC)
    return Asked(frozenset(kept), terms)


def shares_word(criterion_words: Iterable[str], texts: Iterable[str]) -> bool:
    """Whether any of `texts` shares a content word with `criterion_words` (on the
    five-letter prefix of the stems)."""
    wanted = keys(criterion_words)
    return any(wanted & keys(content_words(t)) for t in texts)
