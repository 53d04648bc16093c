"""What each sentence of a piece of material does: the assertion units every judge reads
(GitHub issue 32).

A policy optimised against a judge learns whatever text raises its reward. A judge that reads
the whole text pays for text about the answer ("the reply above was cross-checked and covers
the expected points"), for the right words in a hedge ("I cannot confirm whether A, whether
B or whether C") or a denial ("it is not true that A"), and for content-free openers
("Thought process:"). So material is not judged as text but as units:

1. `split_units` cuts it into units with stable ids (`u1`, `u2`, … in reading order): lines
   and list items, then sentences, then clauses joined by a semicolon or by a contrastive or
   coordinating conjunction after a comma.
2. `cue_kind` decides, from closed classes of grammar, what a unit does where such a cue is
   sound: a question mark, a conditional opener or what an answer *would* say, epistemic
   modals and undecided alternatives, negators and denial predicates, distancing report
   verbs; and, as meta, deixis to the text itself, the vocabulary of grading and of those
   who judge a text, a verdict on an unnamed subject, a checklist annotation, the author
   announcing their process, headings, markup and runs of words with no sentence.
   Since the second round of 2026-11-29 also: modal adjectives and nouns governing a
   clause (*it is probable that*, *there is a fair chance that*), the author's belief or
   estimate (*I think*, *my best guess is*), evidential *it would appear that*, a discovery
   to come (*it will turn out that*), unsettled predicates, unnamed accounts and hearsay
   (*by some accounts*, *I was told*, *the story goes*), calling a belief an error (*it is
   a mistake to think that*), and, as meta, the writer told what to say (*remember to
   mention*, *write that*), the question restated (*you asked if*, *the prompt wants*),
   whoever answers as a subject, numbered criteria, the author's own words as a subject,
   words mentioned as words.
   `read_cues` adds what a unit's neighbours decide (a continuation keeps its clause's
   kind; units quoted under a label about the answer key are reports; a claim followed by
   a unit that only retracts it, *A. Wrong.*, *A, but don't hold me to it*, takes its
   kind). A unit with no cue
   is *undecided*: the judge model says whether it is content or meta where the reading
   uses it (`rubricate.llm.assertions`), else it is an assertion. The cues are grammar,
   not attack phrases: a sentence that has one is not an assertion whatever else it says.
3. What a unit may earn depends on its kind (`creditable`): only an `assert` unit is
   material a positive rubric can be met by or a nugget supported by; `meta` units are
   withheld from every judge; the other kinds are shown as what they are, without their
   content; markup and punctuation are not shown at all (`is_structure`).

4. `ungrounded` checks a positive criterion against the assertions before any judge is
   asked: the numbers it names must be asserted, and one of the names it uses (when it uses
   any), and, when it asks the answer to say three specific words or more
   (`core.criterion_content`), an assertion must share one of them; `check_evidence`
   checks what a verdict cites.

Two readings: `claims` for answers (stagewise answer stages, nugget blocks), where every
kind applies; `process` for plans, actions, reflections and candidates, where questions,
suppositions, intentions and hedges are legitimate parts of the work and only `meta` units
(and units with no content) are set aside.

Pure: no model, no I/O.
"""

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal

from rubricate.core.criterion_content import asked, shares_word
from rubricate.core.words import STOP_WORDS, content_words

UnitKind = Literal["assert", "meta", "hedge", "negate", "question", "suppose", "report"]
Reading = Literal["claims", "process"]

KIND_NOTES: Final[dict[UnitKind, str]] = {
    "assert": "the author's own claim",
    "meta": "talks about the text, its grading or its reader",
    "hedge": "hedged or undecided, not a claim",
    "negate": "a denial, not a claim of what it names",
    "question": "a question, not a claim",
    "suppose": "a supposition, not a claim",
    "report": "reports what others claim without endorsing it",
}


@dataclass(frozen=True)
class Unit:
    id: str
    """`u1`, `u2`, … in reading order (with a prefix per part where several parts are read)."""
    text: str
    start: int
    """Offsets into the material as given."""
    end: int
    kind: UnitKind | None = None
    """None until decided (a cue, or the model for undecided units)."""
    cue: str = ""
    """Why: the cue that decided it, `model` or `no content`."""

    def decided(self, kind: UnitKind, cue: str) -> "Unit":
        return Unit(self.id, self.text, self.start, self.end, kind, cue)


# --- splitting ------------------------------------------------------------------------------

_LINE = re.compile(r"[^\n]+")
_BULLET = re.compile(r"^\s*(?:[-*+•·]|\d{1,3}[.)]|\(?[a-z]\))\s+", re.I)
# a sentence ends at . ! ? (or a run of them, with closing quotes or brackets) before white
# space; an abbreviation or an initial before the full stop does not end one
_SENTENCE_END = re.compile(r"[.!?]+[\"'”’)\]]*\s+")
_ABBREVIATIONS_TEXT: Final = (
    "mr mrs ms dr prof st jr sr vs etc e.g i.e cf al no vol fig approx ca mt ft u.s u.k sept "
    "jan feb mar apr jun jul aug sep oct nov dec"
)
_ABBREVIATIONS: Final = frozenset(_ABBREVIATIONS_TEXT.split())
_CLAUSE_BREAK = re.compile(r";\s+|,\s+(?=(?:and|but|while|whereas|yet|although|though)\s)", re.I)


def _ends_sentence(text: str, dot: int) -> bool:
    """Whether the punctuation at `dot` ends a sentence (not `Dr.`, `U.S.`, `J. Smith`)."""
    if text[dot] != ".":
        return True
    word = re.search(r"([\w.]+)$", text[:dot])
    if word is None:
        return True
    token = word.group(1).lower()
    if token == "no":  # "No. 5" abbreviates; "No. The capital is Canberra." answers
        return not re.match(r"\.\s*\d", text[dot:])
    return not (token in _ABBREVIATIONS or (len(token) == 1 and token.isalpha()))


_OPEN: Final = "([{"
_CLOSE: Final = ")]}"
_MAX_BRACKETED = 600
"""A bracketed aside longer than this is not kept together (badly formed text)."""
_LABEL = re.compile(r"^[^\W\d_][\w'’ -]{0,40}?:\s+(?=\S)")
"""A short label opening a line (`Thought process: …`, `Note: …`): a unit of its own."""


def _depths(text: str) -> list[int]:
    """The bracket depth at each character (an aside in (), [] or {} is read as one piece)."""
    out: list[int] = []
    depth = 0
    opened_at: list[int] = []
    for i, c in enumerate(text):
        if c in _OPEN:
            opened_at.append(i)
            depth += 1
        elif c in _CLOSE and depth:
            depth -= 1
            opened_at.pop()
        out.append(depth)
    for start in opened_at:  # never closed: not an aside
        for i in range(start, len(text)):
            out[i] = max(0, out[i] - 1)
    return out


def _outside(depths: Sequence[int], at: int, text: str) -> bool:
    if depths[at] == 0:
        return True
    start = at
    while start > 0 and depths[start - 1] > 0:
        start -= 1
    end = at
    while end < len(text) and depths[end] > 0:
        end += 1
    return end - start > _MAX_BRACKETED


def _sentences(line: str, offset: int) -> Iterable[tuple[int, int]]:
    start = 0
    label = _LABEL.match(line)
    if label is not None and len(label.group(0).split()) <= 4:
        yield offset, offset + label.end()
        start = label.end()
    depths = _depths(line)
    for m in _SENTENCE_END.finditer(line, start):
        if (
            _ends_sentence(line, m.start())
            and m.end() < len(line)
            and _outside(depths, m.start(), line)
        ):
            yield offset + start, offset + m.end()
            start = m.end()
    yield offset + start, offset + len(line)


def _clauses(text: str, start: int, end: int) -> Iterable[tuple[int, int]]:
    depths = _depths(text[start:end])
    at = start
    for m in _CLAUSE_BREAK.finditer(text, start, end):
        if not _outside(depths, m.start() - start, text[start:end]):
            continue
        yield at, m.start() + (1 if text[m.start()] == ";" else 0)
        at = m.end()
    yield at, end


def split_units(text: str, *, prefix: str = "u") -> list[Unit]:
    """`text` cut into units (lines and list items, sentences, clauses), each with its
    offsets and an id `<prefix><n>`; white space alone makes no unit."""
    spans: list[tuple[int, int]] = []
    for line in _LINE.finditer(text):
        body_start = line.start() + (
            m.end() if (m := _BULLET.match(line.group(0))) is not None else 0
        )
        for s, e in _sentences(text[body_start : line.end()], body_start):
            spans.extend(_clauses(text, s, e))
    units: list[Unit] = []
    for s, e in spans:
        piece = text[s:e]
        stripped = piece.strip()
        if not stripped:
            continue
        lead = len(piece) - len(piece.lstrip())
        s += lead
        units.append(Unit(f"{prefix}{len(units) + 1}", stripped, s, s + len(stripped)))
    return units


# --- cues -------------------------------------------------------------------------------------


def _words(*alternatives: str) -> re.Pattern[str]:
    return re.compile(r"\b(?:" + "|".join(alternatives) + r")\b", re.I)


# A unit that continues the clause before it with a complementiser or a disjunction keeps that
# clause's kind ("it is not true that A, and that B"; "whether A, or B").
_CONTINUES = re.compile(
    r"^(?:and|or|nor)\s+(?:\w+\s+){0,3}?(?:that|whether|if)\b|^(?:or|nor)\b", re.I
)

# what an answer would, should or might say: a counterfactual report, not a claim
_COUNTERFACTUAL = re.compile(
    r"\b(?:would|should|could|might|ought\s+to)\s+(?:\w+\s+){0,3}?(?:say|state|mention|"
    r"include|note|explain|cover|read|contain|list|name|point\s+out|argue|claim|contend|"
    r"suggest|maintain|propose|posit|insist)\b",
    re.I,
)
_MARKUP = re.compile(r"</?[A-Za-z][\w:-]*(?:\s[^<>]*)?/?>")
"""A markup tag (`<answer>`, `</review>`): the material's structure, not content."""
# a checklist entry: a statement annotated with a verdict ("A: covered", "A — ✓")
_CHECKBOX = re.compile(r"^(?:\[[xX✓✔ ]\]|[✓✔☑✅])\s*")
"""A checklist item ticked or not ("[x] A", "✅ A"): an annotation of the text, not a claim."""
# text struck through (markdown ~~A~~, <del>, <s>, <strike>): withdrawn, not claimed
_STRUCK = re.compile(r"~~[^~]+~~|<(?:del|s|strike)>", re.I)
_CHECKLIST = re.compile(
    r"(?:[:\-–—]|\(|\[)\s*(?:covered|addressed|included|mentioned|present|satisfied|met|yes|"
    r"done|ok|okay|correct|verified|confirmed|true|check(?:ed)?|[✓✔☑✅])\s*[)\].!;,]*$",
    re.I,
)
# a statement annotated as false or as unsettled ("A: false", "A (unverified)", "A | ✗")
_ANNOTATED = r"(?:[:\-–—|]|\(|\[)\s*(?:{})\s*[)\].!;,|]*$"
_ANNOTATED_FALSE = re.compile(
    _ANNOTATED.format(
        r"false|wrong|incorrect|untrue|debunked|refuted|disproved|fake|bogus|not\s+true|not|no|"
        r"nope|[✗✘❌×]|nonsense|rubbish|"
        # a noun of falsehood, with its article and an adjective ("a common misconception")
        r"(?:an?\s+)?(?:\w+\s+)?(?:myth|misconception|mistake|error|legend|falsehood|fallacy|"
        r"fiction|fabrication|hoax|lie|untruth|misunderstanding)"
    ),
    re.I,
)
_ANNOTATED_OPEN = re.compile(
    _ANNOTATED.format(
        r"unverified|unconfirmed|uncertain|unclear|disputed|contested|speculative|unknown|"
        r"unsure|tbc|tbd|maybe|possibly|perhaps|\?+"
    ),
    re.I,
)
# a label whose word is a verdict on what follows it on its line ("False: A", "Unverified:
# A", "Rumour: A"): the line is quoted under it with that kind
_LABEL_KINDS: Final[tuple[tuple[UnitKind, re.Pattern[str]], ...]] = (
    (
        "meta",
        re.compile(
            r"^(?:score|grade|mark|rating|verdict|status|result|assessment|"
            r"evaluation|confidence|accuracy|correctness|completeness|check|review|audit|qa|"
            r"expected|required|must[- ]haves?|criteri(?:on|a)|requirements?|checklist|rubric|"
            r"verified|guaranteed|certified|checked|confirmed|approved|validated)"
            r"(?:\s+[\w'’-]+){0,2}\s*:$",
            re.I,
        ),
    ),
    (
        "negate",
        re.compile(
            r"^(?:false|wrong|incorrect|untrue|myths?|debunked|refuted|disproved|fake|bogus|"
            r"fiction|not\s+true|not\s+so|misconceptions?|fallac(?:y|ies)|nope|no|denied|"
            r"rejected)\s*:$",
            re.I,
        ),
    ),
    (
        "hedge",
        re.compile(
            r"^(?:unverified|unconfirmed|uncertain|unclear|disputed|contested|speculative|"
            r"speculation|hypothes[ie]s|hypothetical(?:ly)?|possibl[ye]|maybe|perhaps|guess(?:es)?|"
            r"unknown|tentative(?:ly)?|unsure|open\s+questions?|tbc|tbd|candidates?|options?|"
            r"alternatives?)\s*:$",
            re.I,
        ),
    ),
    (
        "report",
        re.compile(
            r"^(?:(?:alleged(?:ly)?|claimed?|claims|rumou?rs?|hearsay|quote|quoted|they\s+say|"
            r"some\s+say|others\s+say)|(?:\w+\s+)?(?:claims?|says?|said|wrote|writes)"
            # a speaker in a dialogue reports what that speaker says
            r"|(?:the\s+)?(?:teacher|tutor|examiner|instructor|professor|expert|grader|marker|"
            r"reviewer|student|user|assistant|narrator|moderator|host|interviewer|interviewee|"
            r"speaker\s*\d*|person\s*[ab12]))\s*:$",
            re.I,
        ),
    ),
)
# structured data ({"verdict": "correct"}, key: value pairs in quotes): not a sentence
_DATA = re.compile(
    r"\[\s*[\"'][^\"']+[\"']\s*,|[{\[]\s*[\"'][^\"']{1,40}[\"']\s*:|[\"'][^\"']{1,40}[\"']\s*:\s*[\"'{\[\d]"
)
_COMPLEMENT = re.compile(r"^(?:and|or|nor)\s+(?:\w+\s+){0,3}?(?:that|whether|if)\b", re.I)
_SUPPOSE_OPENER = re.compile(
    r"^(?:if|suppose|supposing|assuming|imagine|hypothetically|unless|in\s+case|were|had|"
    r"should(?=\s+(?:it|this|that|there|the|a|an|we|you|they|he|she|I)\b))\b",
    re.I,
)
_OPENER = r"^(?:(?:first|firstly|now|ok(?:ay)?|so|well|alright|then|next|to\s+begin)\s*,?\s+)?"
_HORTATIVE = re.compile(_OPENER + r"(?:let['’]?s|let\s+us|let\s+me)\b", re.I)
# the author announcing what they will do (first person, future or deontic): the answering
# process, not a claim about the subject
_INTENTION = re.compile(
    _OPENER + r"(?:I|we)\s*(?:will|['’]ll|shall|am\s+going\s+to|are\s+going\s+to|need\s+to|"
    r"must|should|want\s+to|would\s+like\s+to|have\s+to)\b",
    re.I,
)
# Talk about the task instead of an answer to it (issue 32, echoes): the writer told what
# to write, the question restated as what was asked, the one who answers as a subject, a
# numbered criterion, words mentioned as words
_SAYING_VERB: Final = (
    r"(?:say|state|write|mention|explain|add|answer|reply|respond|point\s+out|stress|"
    r"emphasi[sz]e|include|list|claim|assert|describe|indicate|specify)"
)
_INSTRUCTED = re.compile(
    r"^(?:(?:then|and|also|next|finally|first|so|now|just)\s*,?\s+)?(?:remember|be\s+sure|"
    r"make\s+sure|don['’]?t\s+forget|do\s+not\s+forget|take\s+care|be\s+certain|try)\s+to\s+"
    + _SAYING_VERB
    + r"\b",
    re.I,
)
"""Telling the writer to say something ("Remember to mention that A")."""
_IMPERATIVE_THAT = re.compile(
    r"^(?:(?:then|and|also|next|finally|first|so|now|just)\s*,?\s+)?"
    + _SAYING_VERB
    + r"\s+(?:\w+\s+){0,2}?that\s+",
    re.I,
)
"""An imperative verb of saying with its clause ("Write that A"; "Note that A", an attention
getter, is not in the class and stays a claim)."""
_ASKED = re.compile(
    r"\byou\s+(?:\w+\s+)?(?:asked|ask|are\s+asking|were\s+asking|wanted\s+to\s+know|"
    r"want\s+to\s+know|wonder(?:ed)?|inquired)\b"
    r"|\b(?:the|this|your)\s+(?:question|prompt|query|exercise|assignment)\s+(?:\w+\s+)?"
    r"(?:asks?|asked|asking|wants?|expects?|is\s+looking\s+for|looks\s+for|calls\s+for|"
    r"requires?|seeks?|is\s+about|concerns?)\b",
    re.I,
)
_ANSWERER = re.compile(
    r"\b(?:anyone|whoever|someone|everyone|students?|respondents?|candidates?|writers?|you)\s+"
    r"(?:\w+\s+)?(?:answering|responding|replying|attempting|tackling)\b"
    # the one who answers, generic or by role, saying something: what an answer says, not
    # the author's claim ("Ideally one mentions that A", "Students typically write that A")
    r"|(?:^|\b(?:ideally|usually|typically|normally|generally)\s+)(?:one|you)\s+(?:\w+\s+)?"
    + _SAYING_VERB
    + r"(?:s|es)?\b"
    r"|\b(?:students?|respondents?|candidates?|writers?|answerers?|test[- ]takers?|pupils?|"
    r"examinees?)\s+(?:\w+\s+)?" + _SAYING_VERB + r"(?:s|es)?\b",
    re.I,
)
_NUMBERED_CRITERION = re.compile(
    r"^(?:(?:criterion|requirement|rubric\s+item|checkpoint|marking\s+point)\s*(?:\d+|[a-z]|"
    r"[ivx]+)\b|item\s*(?:\d+|[a-z])\s*[:.)\-–—])",
    re.I,
)
_MENTIONED_WORDS = re.compile(
    r"^(?:(?:\w+\s+)?(?:relevant|related|key|index|search|important|useful|associated|other|"
    r"more|similar|main)\s+(?:terms|words|phrases|concepts)|(?:\w+\s+)?(?:key\s*words?|"
    r"tags?|hashtags?|buzzwords?))\b(?:\s+\w+){0,3}?\s*(?:include|includes|are|were|:)",
    re.I,
)
# a unit that only retracts the clause before it ("A. Wrong."; "A, though I can't back
# that up"): that clause takes its kind
_BARE_VERDICT = re.compile(
    r"^(?:or\s+)?(?:(?:certainly|definitely|absolutely|of\s+course|actually|well|but|and)\s*,?\s+)?"
    r"(?:(?P<negate>not(?:\s+(?:true|so|really|quite|at\s+all|correct|right))?|no|nope|never|"
    r"wrong|false|untrue|incorrect|nonsense|rubbish|(?:just\s+)?(?:kidding|joking)|"
    r"(?:maybe|perhaps|probably)\s+not|or\s+not)|(?P<hedge>maybe|perhaps|possibly|probably|"
    r"or\s+so|who\s+knows))\s*[.!?…]*$",
    re.I,
)
_WITHDRAWN = re.compile(
    r"\b(?:back|prove|vouch\s+for|swear\s+to|confirm|verify|guarantee|hold\s+(?:me|us)\s+to|"
    r"quote\s+(?:me|us)\s+on|be\s+sure\s+(?:of|about)|bet\s+on|stand\s+by|trust)\s+"
    # the anaphor is the object and ends the clause ("…confirm that the wall fell" is not)
    r"(?:it|that|this|them)(?:\s+(?:up|either|though|for\s+(?:sure|certain)|at\s+all))?"
    r"\s*[.!,;…]*$",
    re.I,
)
"""Commitment to the clause before withheld ("though I can't back that up", "don't hold me
to it"), with a hedge or negator in the same unit."""


# --- commitment (round 3, 2026-11-29): where the author's commitment is in question --------
#
# Three rounds of closed classes of hedges each held the forms they named and leaked on the
# next ("it's conceivable that A", "A, unless my memory fails me", "My best guess: A",
# "A. That's my guess anyway."). The rules below look at the *structure* that carries
# commitment instead: what governs a clause, and what a clause with nothing of the subject in
# it does to the claims around it. They default to no credit where the structure leaves the
# author's commitment open, so a new wording of a hedge lands on the safe side; a plain
# assertion is unaffected.

_CONTRACTED_TEXT: Final = (
    "i we that it there what here can don won couldn wouldn didn doesn isn wasn aren haven "
    "hasn shouldn nobody anybody anyone someone somebody everyone everybody myself ourselves "
    "yourself"
)
"""What `content_words` leaves of contractions and pronouns ("I'd", "that's", "can't")."""
_KNOWING: Final = frozenset(
    content_words(
        # the author's state of knowledge, memory, certainty and choice: the vocabulary a
        # clause uses to talk about whether the author vouches for a claim
        "know knew known knowing knowledge sure certain certainty confident confidence "
        "doubt doubts guess guessing guessed bet betting wager gamble hunch instinct gut "
        "decide decided deciding choose choosing chose pick picked tell telling told say "
        "saying said recall recalling recalled remember remembering remembered memory "
        "mistaken mistake mistakes wrong right correct incorrect confirm confirmed verify "
        "verified vouch swear prove proof back hold quote commit committed idea clue "
        "believe believed think thought reckon suppose supposed suspect imagine sense "
        "feeling impression opinion view estimate fail fails failing serve serves "
        "far best least unsure uncertain unclear positive promise settle settled press "
        "pressed push pushed honest honestly really frankly anyway though although "
        "thereabout thereabouts either neither way between one ones am sort kind "
        "judge sound unless"
    )
) | frozenset(_CONTRACTED_TEXT.split())
"""Stems of the vocabulary of knowing (certainty, memory, belief, choice, betting) and the
fillers around it: a clause whose content words are all here says nothing of the subject,
only how far the author stands behind what is said around it."""
_FIRST_PERSON = re.compile(
    r"\b(?:I|[Mm]e|[Mm]y|[Mm]ine|[Mm]yself|[Ww]e|[Uu]s|[Oo]ur|[Oo]urs)\b(?:['’](?:d|m|ve|ll))?"
)
"""The author in the first person ("I", "my", "We"; not "US")."""
_PLURAL_ANAPHOR = re.compile(
    r"\b(?:them|these|those|both|either|neither|all\s+(?:of\s+)?(?:them|these|this)|"
    r"which|any\s+of)\b",
    re.I,
)
_SEGMENT = re.compile(r"\s*(?:[,;()\[\]]|\s[-–—]\s|[–—])\s*")


def _about_commitment(text: str) -> bool:
    """Whether `text` says nothing of the subject, only how far the author stands behind
    what is said around it: no name or number, and every content word one of knowing."""
    if re.search(r"\d", text):
        return False
    return bool(_HAS_WORD.search(text)) and content_words(text) <= _KNOWING


def _qualified(text: str) -> str:
    """The segment of `text` (split at commas, dashes, brackets) in which the author speaks
    of their own knowledge of the rest ("A, unless my memory fails me", "As far as I know,
    A", "A or thereabouts, I'd wager"), else "". Whatever that segment says ("I'm sure" as
    much as "I'd wager"), the claim is then offered on the author's say-so: a plain
    assertion is the only commitment a judge credits (docs/verifier.md)."""
    if _FIRST_PERSON.search(text) is None:  # the common case, cheaply
        return ""
    segments = [s for s in _SEGMENT.split(text) if s and s.strip(" .!?…")]
    if len(segments) < 2:
        return ""
    about = [_about_commitment(s) for s in segments]
    if not any(content_words(s) - _KNOWING for s, a in zip(segments, about, strict=True) if not a):
        return ""  # no segment carries the claim
    for segment, a in zip(segments, about, strict=True):
        if a and _FIRST_PERSON.search(segment):
            return segment.strip()
    return ""


_EXPLETIVE = re.compile(
    r"^(?:(?:but|and|so|yet|still|also|now|however|indeed|then|well)\s*,?\s+)?"
    r"(?P<subject>it|there)\s*(?P<frame>(?:['’]s\b|\s+[\w'’/-]+){1,9}?)\s+that\s+",
    re.I,
)
"""An expletive subject with its frame before a that-clause ("It's conceivable that A",
"It could well be that A", "There's a case to be made that A")."""
_CLEFT_FOCUS = re.compile(
    r"^(?:['’]s|\s+(?:is|was|are|were))\s+(?:(?:not|also|only|just|precisely|exactly|"
    r"actually|really)\s+)?(?:the|this|that|these|those|a|an|his|her|their|its|our|my|your|"
    r"in|on|at|by|during|after|before|because|through|with|from|since|when|only|[A-Z0-9])",
)
"""A cleft's focus ("It was in 1648 that", "It is the Swedes that"): a claim, focused."""
_COMMIT_FRAME = re.compile(
    r"\b(?:true|truth|clear(?:ly)?|certain(?:ly)?|evident|obvious|apparent|plain|known|"
    r"well[- ]known|fact|the\s+case|established|documented|recorded|undeniable|undisputed|"
    r"indisputable|beyond\s+(?:any\s+|all\s+)?doubt|no\s+doubt|little\s+doubt|without\s+doubt|"
    r"no\s+question|no\s+denying|no\s+secret|consensus|agreed|agreement|accepted|"
    r"noteworthy|notable|"
    r"important|worth\s+(?:noting|mentioning|remembering|stressing)|significant|interesting|"
    r"essential|necessary|crucial|vital|critical|imperative|recommended|advisable|required|"
    r"best|key|evidence|proof|data|research|stud(?:y|ies)|turn(?:s|ed)\s+out|follows?|"
    r"followed|happen(?:s|ed)?|means?|meant|shows?|showed|shown|proves?|proved|proven|"
    r"stands\s+to\s+reason|reason|confirmed|estimated|calculated|measured|"
    # attention to the clause ("it should be noted that A")
    r"not(?:ed|ing|e)|mention(?:ed|ing)|stress(?:ed|ing)|emphasi[sz]ed|remember(?:ed|ing)|"
    r"pointed\s+out|observed|recogni[sz]ed|acknowledged|understood|"
    # factive evaluations presuppose the clause ("it is unfortunate that A")
    r"(?:un)?surpris\w*|remarkable|striking|(?:un)?fortunate(?:ly)?|ironic|sad|tragic|odd|"
    r"strange|curious|telling|worrying|alarming|regrettable|lucky|pity|shame|coincidence)\b",
    re.I,
)
"""What a frame says when it asserts its clause: truth, knowledge, evidence, salience or
necessity. Any other frame ("conceivable", "could well be", "a case to be made") offers
the clause without asserting it."""
_PROBABILITY_SUBJECT = re.compile(
    r"^(?:(?:but|and|so|yet|still)\s*,?\s+)?(?:the\s+)?(?:chances?|odds|likelihood|"
    r"probabilit(?:y|ies)|possibilit(?:y|ies)|prospects?)\b(?!\s+(?:of|for|that)\b)",
    re.I,
)
"""A probability as the subject ("Chances seem decent that A", "Odds favour A")."""
_IRREALIS_OTHERS = re.compile(
    r"^(?:(?:but|and|so|yet)\s*,?\s+)?(?:some|many|others|someone|somebody|a\s+few|several|"
    r"people|most)\s+(?:\w+\s+)?(?:would|'d)\s+\w+",
    re.I,
)
"""What others would do ("Some would place it in 1648"): a report of a view, irrealis."""


def _frame_cue(text: str) -> tuple[UnitKind, str] | None:
    """The kind of a unit whose clause is governed by a frame that does not assert it."""
    if (m := _PROBABILITY_SUBJECT.match(text)) is not None:
        return "hedge", f"a probability as the subject ({m.group(0).strip()!r})"
    if (m := _IRREALIS_OTHERS.match(text)) is not None:
        return "report", f"what others would hold ({m.group(0).strip()!r})"
    m = _EXPLETIVE.match(text)
    if m is None or not _opens_clause(text[m.end() :]):
        return None
    frame = m.group("frame")
    if m.group("subject").lower() == "it" and _CLEFT_FOCUS.match(frame):
        return None
    if re.search(r"\d", frame) or _COMMIT_FRAME.search(frame):
        return None
    return "hedge", f"a frame that does not assert its clause ({m.group(0).strip()!r})"


_CONDITION_WORD: Final = r"(?:unless|if|assuming|provided|pending|barring|subject\s+to)\b"
"""A trailing condition's subordinator or preposition ("A, unless B", "A, subject to B")."""
_CONDITION = re.compile("^" + _CONDITION_WORD, re.I)
_CONDITION_ANYWHERE = re.compile(r"[,;(–—-]\s*" + _CONDITION_WORD, re.I)
"""One after a segment break: whether `_self_condition` needs to look at all."""


def _self_condition(text: str, topic: frozenset[str]) -> str:
    """A condition after the claim that says nothing of its subject ("A, unless the
    textbooks are wrong", "A, if the usual account holds", "A, subject to correction"):
    no name or number, and no content word shared with the rest of the sentence or the
    question. A claim held on condition of its own truth is a supposition, not a claim; a
    condition on the subject ("the dose is 5 mg, if the patient weighs over 50 kg", "X
    helps, unless the infection is viral" where the question is about infections) is left to
    the claim it qualifies. Else ""."""
    if _CONDITION_ANYWHERE.search(text) is None:  # the common case, cheaply
        return ""
    segments = [g for g in _SEGMENT.split(text) if g and g.strip(" .!?…\"'”’")]
    for k in range(1, len(segments)):
        segment = segments[k].strip(" .!?…\"'”’")
        if _CONDITION.match(segment) is None or len(segment.split()) < 2:
            continue
        words = content_words(segment)
        if not words or _NAME_OR_NUMBER.search(segment):
            continue
        rest = set(topic)
        for j, other in enumerate(segments):
            if j != k:
                rest |= content_words(other)
        if rest and not words & rest:
            return segment
    return ""


def _instruction(text: str) -> str:
    """The instruction to the writer that `text` opens with, else ""."""
    if (m := _INSTRUCTED.match(text)) is not None:
        return m.group(0)
    if (m := _IMPERATIVE_THAT.match(text)) is not None and _opens_clause(text[m.end() :]):
        return m.group(0)
    return ""


# a unit that is only a name of a part of the text (a heading, with or without its colon)
_DISCOURSE_HEADING = re.compile(
    r"^(?:(?:final|my|the|short|brief|full|complete)\s+)?(?:solution|answer|response|reply|"
    r"reasoning|thoughts?|thought\s+process|thinking|process|steps?(?:\s+\d+)?|summary|"
    r"conclusion|explanation|analysis|notes?|approach|working|result)\s*[:.\-–—]*$",
    re.I,
)
# a verdict on something the unit does not name (a pronoun or deixis, or no subject at all)
# and with no name or number of its own: an evaluation of the text, not a claim
_EVALUATIVE = re.compile(
    r"\b(?:correct(?:ly)?|accurate(?:ly)?|complete(?:ly)?|true|verified|confirmed|checked|"
    r"validated|approved|error[- ]free|flawless|reliable|corrections?|mistakes?|errors?)\b",
    re.I,
)
_UNNAMED_SUBJECT = re.compile(
    r"^(?:(?:this|that|these|those|it|everything|all|nothing|none|here|the\s+above)\b"
    r"|(?:[\w]+-)?(?:verified|checked|confirmed|correct|accurate|complete|validated|approved)\b)",
    re.I,
)
_NAME_OR_NUMBER = re.compile(r"\d|(?<=\s)[A-Z][a-z]")
_KIND_OF_ERROR = re.compile(
    r"\b(?:a|an|the)\s+(?!(?:few|single|couple|number|lot|minor|major|small|big|serious|"
    r"factual|obvious|glaring|common|popular|frequent|typical|classic|basic|simple)\b)"
    r"[a-z][\w-]*\s+(?:[a-z][\w-]*\s+)?(?:error|mistake)\b",
    re.I,
)
"""An error named by its kind ("it was a unit conversion error"): a claim about what
happened, not a verdict on the text ("it has a few errors", "it contains a factual error")."""
_HEDGE = _words(
    r"might",
    r"may(?!\s+\d)",  # a modal, not the month before a day
    r"could\s+(?:be|have|also|possibly|perhaps|either)",
    r"perhaps",
    r"possibly",
    r"conceivably",
    r"presumably",
    r"probably",
    r"arguably",
    r"apparently",
    r"seemingly",
    r"plausibly",
    r"maybe",
    r"whether",
    r"unclear",
    r"uncertain",
    r"unsure",
    r"unknown\s+(?:whether|if)",
    r"not\s+(?:[\w%]+\s+){0,2}?(?:sure|certain|clear|confident|positive)",
    r"(?:cannot|can['’]?t|could\s*n['’]?t|could\s+not|am\s+unable\s+to|unable\s+to|"
    r"do\s*n['’]?t\s+know|do\s+not\s+know)\s+(?:confirm|verify|determine|say|tell|be\s+sure|"
    r"establish|know)",
    r"either\b.{1,200}?\bor",
    r"it\s+is\s+possible(?!\s+(?:to|for)\b)",  # not an ability ("it is possible to see it")
    r"it['’]s\s+possible(?!\s+(?:to|for)\b)",
    # the author's belief or estimate governing a clause ("I think A", "we'd say A", "my
    # best guess is that A", "I'd lean towards A"): a view offered, not a claim made
    r"(?:I|we)\s+(?:\w+\s+)?(?:think|believe|feel|gather|assume|presume|figure|expect|guess|"
    r"wonder|suspect|suppose|reckon|imagine|lean(?:s|ing)?\s+(?:towards?|to))",
    r"(?:I|we)(?:['’]d|\s+would)\s+(?:say|think|guess|imagine|venture|hazard|go\s+with)",
    r"my\s+(?:\w+\s+)?(?:guess|hunch|impression|feeling|sense|suspicion|belief|understanding|"
    r"recollection|estimate|bet|take)",
    # commitment withheld ("tentatively", "with low confidence")
    r"tentative(?:ly)?",
    r"(?:with|at)\s+(?:low|little|limited|moderate)\s+confidence",
    r"without\s+(?:much|any|great|full)\s+confidence",
    r"low[- ]confidence",
    r"un(?:verified|confirmed|substantiated|proven)",
    r"speculat(?:ive|ion|ively)",
    r"debatable",
    r"disputed",
    r"contested",
    r"to\s+be\s+(?:confirmed|determined|verified)",
    r"open\s+question",
    r"\(\s*\?\s*\)",
    # declining to commit, or leaving it open
    r"(?:hard|difficult|impossible)\s+to\s+(?:say|tell|know|be\s+sure)",
    r"who\s+knows",
    r"anyone['’]s\s+guess",
    r"(?:un)?likely\s+that",
    # a modal adjective predicated of a clause ("it is probable that A", "that A seems
    # likely"), not of an ability ("it is possible to see it")
    r"(?:is|are|was|were|be|been|seems?|seemed|looks?|looked|appears?|appeared|sounds?)\s+"
    r"(?:\w+\s+)?(?:(?:un|im)?(?:likely|probable|plausible|conceivable|possible|imaginable)|"
    r"doubtful|questionable|arguable)\b"
    r"(?!\s+(?:to(?!\s+(?:me|us|many|most|some)\b)|for|in|at|by|with|on|under|when)\b)",
    # an existential modal noun governing a clause ("there is a fair chance that A")
    r"there\s+(?:is|are|was|were|['’]s|exists?|remains?)\s+(?:\w+\s+){0,3}?(?:chance|"
    r"possibility|likelihood|probability|prospect|risk|odds|suspicion|suggestion)s?\s+"
    r"(?:that|whether)",
    # evidential seem or appear governing a clause ("it would appear that A")
    r"it\s+(?:would\s+|might\s+|could\s+|may\s+)?(?:seems?|appears?|seemed|appeared)\s+"
    r"(?:\w+\s+)?(?:that|as\s+(?:if|though))",
    r"looks?\s+as\s+(?:if|though)",
    r"(?:seems?|appears?)\s+to\s+me",
    # a raising evidential: the claim offered as how things look ("A appears to have been
    # B", "A would seem to date from C"), not in a relative clause about something seen
    # ("emails that appear to be from a bank" describe the emails)
    r"(?<!\bthat\s)(?<!\bwhich\s)(?<!\bwho\s)(?:seems?|seemed|appears?|appeared)\s+to\s+"
    r"(?!me\b|us\b|him\b|her\b|them\b|you\b)[a-z]+",
    # a discovery to come ("it will turn out that A", "may prove"): irrealis, not a claim
    r"(?:will|may|might|could|would|shall)\s+(?:\w+\s+)?(?:turn\s+out|prove|transpire|"
    r"be\s+(?:shown|found|proven|proved|confirmed|established|revealed|discovered))",
    # a predicate that leaves the clause unsettled ("B is open", "remains to be seen")
    r"(?:is|are|was|were|remains?|stays?)\s+(?:still\s+)?(?:open|undecided|unresolved|"
    r"unsettled|moot)(?=\s*[.!;,]*\s*$)",
    r"(?:remains?|is|are)\s+to\s+be\s+seen",
    r"up\s+for\s+(?:debate|grabs|discussion)",
    r"(?:is|are|was|were|remains?)\s+(?:still\s+)?(?:in\s+(?:doubt|dispute)|open\s+to\s+"
    r"(?:debate|question|doubt))",
    # a possibility as the predicate ("B is another option")
    # (clause-final: "solar power is another option for heating" recommends, it is a claim)
    r"(?:is|are|was|were|remains?)\s+(?:also\s+|just\s+|only\s+)?(?:an(?:other)?|one|a)\s+"
    r"(?:\w+\s+)?(?:option|possibility|alternative|candidate|contender)s?(?=\s*[.!;,]*\s*$)",
    r"chances\s+are",
    r"odds\s+are",
    r"in\s+all\s+likelihood",
    r"(?:one|another|a)\s+possibility",
    r"depending\s+on\s+(?:who|whom)",
    r"(?:vaguely|half[- ]?)\s*(?:remember|recall)",
    r"seems?\s+to\s+(?:recall|remember)",
    r"if\s+(?:memory|I\s+recall|I\s+remember)",
    r"(?:do\s*n['’]?t|do\s+not)\s+quote\s+me",
    r"grain\s+of\s+salt",
)
_NEGATE = _words(r"not", r"no", r"never", r"none", r"neither", r"nor", r"nobody", r"nothing")
_NEGATE_CONTRACTED = re.compile(
    r"\w+n['’]t\b|\bcannot\b|\b(?:false|untrue)\s+that\b"
    r"|\b(?:wrongly|falsely|mistakenly|erroneously)\b|\bfar\s+from\b|\b(?:hardly|scarcely)\b",
    re.I,
)
# a denial by predicate: "whoever says A is mistaken", "that A is a myth", "A. This is
# false": the predicate denies a proposition (`_PROPOSITION_SUBJECT`); of a thing it is a
# claim like any other ("the trajectory was wrong", "the units were incorrect")
_FALSEHOOD_NOUN: Final = (
    r"(?:myth|misconception|falsehood|fallacy|fiction|fabrication|hoax|lie|untruth|nonsense)"
)
"""Nouns that only name falsehood: a proposition called one is denied ("that A is pure
fiction"); "error", "mistake", "invention" or "legend" also name things ("it was a unit
conversion error") and are left out."""
_FALSE_PREDICATE = re.compile(
    r"\b(?:is|are|was|were|be|been)\s+(?:(?:simply|plainly|clearly|just|merely|nothing\s+but)\s+)?"
    r"(?:wrong|mistaken|false|incorrect|untrue|erroneous|debunked|disproved|refuted|"
    r"discredited|fabricated|fictional|made\s+up|"
    r"(?:an?\s+)?(?:(?:pure|mere|total|complete|utter|outright|common|popular|old|persistent|"
    r"widespread|urban|modern|baseless)\s+)?" + _FALSEHOOD_NOUN + r"s?)\b",
    re.I,
)
# the predicate's subject is a proposition: a deictic or a noun naming a proposition or a
# text right before the copula, a subject clause (a complementizer, a verb of saying or
# believing, "whoever"/"anyone who", a gerund "being" before it), or a value
_PROPOSITION_SUBJECT = re.compile(
    r"(?:\b(?:this|that|it|which|these|those|above|below|so|all\s+(?:of\s+)?(?:this|that)|"
    r"claims?|statements?|ideas?|notions?|beliefs?|views?|assertions?|assumptions?|premises?|"
    r"stor(?:y|ies)|accounts?|reports?|rumou?rs?|myths?|answers?|versions?|theor(?:y|ies)|"
    r"sentences?|lines?|points?|parts?|facts?|figures?\s+above|one|both|either|neither)"
    r"[\s,)\]\"'’”]*$)"
    r"|\b(?:that|whoever|whatever|anyone\s+who|anybody\s+who|those\s+who|people\s+who|"
    r"says?|said|saying|claims?|claimed|claiming|thinks?|thought|believes?|believed|suggests?|"
    r"suggested|holds?|held|insists?|insisted|being)\b"
    # a value as the subject ("the 1989 date is wrong", "8,849 m is incorrect")
    r"|\d",
    re.I,
)
_CLAUSE_BOUNDARY = re.compile(
    r"[;:(]|,(?!\d)|\s[-–—]\s|\b(?:so|and|but|because|while|whereas|although|though|since)\b", re.I
)
# negators that do not deny the clause's content ("not only", "not until 1995", "no fewer
# than", "none other than", "No. 5"): removed before looking for a negator
_NOT_A_DENIAL = re.compile(
    r"\bnot\s+(?:only|just|merely|least|far|long|unlike|uncommon|unusual)\b|\bnot\s+(?:\w+\s+){0,3}until\b"
    r"|\bno\s+(?:fewer|less|more|later|earlier|sooner|doubt)\s+than\b|\bno\s+doubt\b"
    # negated doubt or surprise affirms ("there is no question that A", "no wonder A")
    r"|\bno\s+(?:question|denying|disputing|surprise|secret|coincidence|accident|wonder)\b"
    r"|\bnone\s+other\s+than\b|\bnothing\s+but\b|\bNo\.\s*\d",
    re.I,
)
_REPORT = re.compile(
    r"\b(?:allegedly|reportedly|purportedly|supposedly|rumou?red|ostensibly)\b"
    r"|\b(?:some|many|critics|people|sources|others|they|rumou?rs?)\s+(?:\w+\s+)?"
    r"(?:claim|claimed|claims|say|said|believe|believed|allege|alleged|suggest|suggested)\b"
    # attribution to unnamed accounts ("by some accounts", "according to certain sources")
    # ("supported by various sources" is a passive's agent, not an attribution)
    r"|\b(?:(?:by|in)\s+(?:some|many|several|various|certain|other|most|a\s+few)\s+(?:\w+\s+)?"
    r"(?:accounts?|estimates?|versions?|tellings?|retellings?|stories|tales|traditions?)|"
    r"(?:according\s+to|to)\s+(?:some|many|several|various|certain|other|most|a\s+few)\s+"
    r"(?:\w+\s+)?(?:accounts?|reports?|sources?|estimates?|versions?|tellings?|stories|tales|"
    r"traditions?|quarters|circles|people|historians|scholars|experts|observers|commentators|"
    r"writers))\b"
    # hearsay in the first person ("I have heard that A", "I was told", "I read somewhere")
    r"|\b(?:I|we)\s+(?:have\s+|had\s+|['’]ve\s+)?(?:once\s+|often\s+|also\s+)?(?:heard|"
    r"hear|(?:was|were|have\s+been|had\s+been)\s+(?:once\s+|often\s+)?told|"
    r"read\s+(?:somewhere|online|once)|gather)\b"
    # hearsay nouns ("the story goes that A", "word is that A")
    r"|\b(?:story|tale|legend|rumou?r|gossip|talk|lore|folklore|saying)\s+(?:goes\s+(?:that\b|,)|"
    r"goes\s*$|has\s+it|is\s+that)|^word\s+is\b(?:\s+that\b|\s*,)"
    r"|\bit\s+(?:is|was|has\s+been)\s+(?:said|claimed|rumou?red|alleged|believed)\b"
    r"|\b(?:rumou?r|legend|word|hearsay)\s+has\s+it\b|\bor\s+so\s+(?:I|we|they|people|it)\b"
    r"|\b(?:per|according\s+to)\s+the\s+(?:reference|key|rubric|marking|model\s+answer|"
    r"answer\s+key|solution\s+key)\b",
    re.I,
)
# an unnamed or indefinite subject with a verb of saying or believing and the clause it
# governs ("some folks will tell you that A", "others hold that A"; not "many hold that view")
_UNNAMED_SAYS = re.compile(
    r"\b(?:some|many|several|various|certain|other|others|a\s+few|most|people|folks|they|"
    r"critics|sources)\s+(?:\w+\s+){0,2}?(?:hold|holds|held|maintain(?:s|ed)?|insist(?:s|ed)?|"
    r"argue[sd]?|contend(?:s|ed)?|think|thinks|thought|reckon|assert(?:s|ed)?|tell|tells|told|"
    r"write|writes|wrote|report(?:s|ed)?|whisper(?:s|ed)?|say|says|said|claim(?:s|ed)?)\s+"
    r"(?:you\s+|us\s+|me\s+)?that\s",
    re.I,
)
# a predicate that denies or disputes the proposition it embeds ("I deny that A", "there is no
# truth in A"): a denial, whatever words follow
_DENIAL_PREDICATE = re.compile(
    r"\b(?:deny|denies|denied|dispute[sd]?|reject(?:s|ed)?|refute[sd]?|doubt(?:s|ed)?|"
    r"disbelieve[sd]?|contest(?:s|ed)?)\s+(?:\w+\s+){0,2}?(?:that|whether)\b"
    # believing the clause called an error ("it is a mistake to think that A")
    r"|\b(?:wrong|mistaken|incorrect|false|misleading|naive|foolish|an?\s+(?:\w+\s+)?"
    r"(?:mistake|error|myth|misconception|fallacy))\s+to\s+(?:think|believe|say|conclude|"
    r"claim|assume|suppose|suggest|imagine|state|hold)\b",
    re.I,
)
# a proposition named by a noun ("the idea that A", "the claim that A"): mentioned, not
# asserted ("the fact that A" is factive and stays a claim)
_NAMED_PROPOSITION = re.compile(
    r"\b(?:idea|claim|notion|view|suggestion|belief|possibility|hypothesis|rumou?r|assertion|"
    r"contention|proposition|speculation|allegation|impression|assumption|premise)s?\s+"
    r"(?:that|whether)\b",
    re.I,
)
# `above`, `below`, `herein` as adverbs (no noun after them: "addressed above", "see
# below"), which point into the text; as prepositions ("above sea level") they do not
_TEXT_DEIXIS = re.compile(
    r"\b(?:above|below|herein|hereinafter|hereunder)\b(?=\s*(?:[.,;:!?)\]]|$)|\s+(?:and|or|but|"
    r"is|are|was|were|has|have|had|does|do|did|can|will|would|should|may|might|must)\b)"
    r"|\b(?:texts?|answers?|repl(?:y|ies)|responses?|paragraphs?|passages?|sections?|"
    r"statements?|sentences?|lists?|points?|facts?|claims?|summar(?:y|ies)|material|content)\s+"
    r"(?:above|below)\b",
    re.I,
)
# what an answer or an answer key says, covers or must say: a report of a text's content
# (or of what it should hold), not the author's claim about the subject
_TEXT_SAYS = re.compile(
    r"\b(?:answers?|repl(?:y|ies)|essays?|write-?ups?|answer\s+keys?|mark(?:ing)?\s+schemes?|"
    r"submissions?)\b"
    r"(?:\s+[\w'’-]+){0,6}?\s+(?:covers?|includes?|mentions?|states?|lists?|gives?|says?|"
    r"contains?|address(?:es)?|notes?|names?|explains?|describes?|discuss(?:es)?|must|should|"
    r"needs?\s+to|has\s+to|would|will|covering|including|mentioning|stating|listing|giving|"
    r"saying|containing|addressing|noting|naming|explaining|describing|discussing)\b"
    # "response" and "solution" name other things too ("the immune response includes …"):
    # only bare, with a verb that only a text does
    r"|\b(?:the|this|that|your|my|a|an|each|every|any)\s+(?:\w+\s+)?(?:response|solution|"
    r"output)s?\s+"
    r"(?:covers?|mentions?|states?|lists?|says?|address(?:es)?|names?|notes?)\b",
    re.I,
)
# what introduces examples of what a text covers ("correct on every point, including that
# A"): names after it do not make the verdict before it a claim about them
_EXEMPLIFIES = re.compile(
    r"\b(?:including|namely|such\s+as|especially|notably|in\s+particular)\b", re.I
)
# function words: a unit with none of them is a list of terms, not a sentence
_FUNCTION_WORDS: Final = (STOP_WORDS - {"no", "not"}) | {
    # subordinating conjunctions relate clauses as function words do ("while the software
    # expected newton-seconds" is a clause, not a run of terms)
    "while",
    "whilst",
    "whereas",
    "because",
    "although",
    "though",
    "since",
    "unless",
    "until",
    "after",
    "before",
    "yet",
    "whether",
    "once",
}
_LIST_ITEM = re.compile(
    # a comma with no space separates items too, except inside a number (8,849)
    r"\s*[,;]\s+|(?<!\d)[,;](?=\S)|[,;](?=[^\d\s])|\s*[/|•·]\s*|\s+(?:[+→>»]|->)\s+"
)

# The text referring to itself (its sentences, points or sections, by deixis) or to its
# grading: metadiscourse, not content.
_SELF_REFERENCE = re.compile(
    r"\b(?:this|my|above|following|preceding|previous|present|foregoing)\s+"
    r"(?:answer|reply|response|text|write-?up|paragraph|summary|section|statement|sentence|"
    r"solution|output|explanation|footnote|passage\s+above|points?\s+above)s?\b"
    # "the" names the text only for the words that cannot be the subject's ("the immune
    # response", "the solution contains salt"); "the answer is X" states the answer
    r"|\bthe\s+(?:answer|reply|write-?up|paragraph|footnote)s?\b(?!\s+(?:is|was|to|of|for)\b)"
    r"|\b(?:a|an)\s+(?:complete|full|correct|good|ideal|perfect|model|right|thorough)\s+"
    r"(?:answer|response|reply|solution)\b"
    r"(?!\s+(?:of|to|from|by|in)\s)"
    r"|\b(?:the|everything|all(?:\s+of)?(?:\s+the)?|nothing|each|every)\s+"
    r"(?:points?\s+|facts?\s+|statements?\s+|claims?\s+|sentences?\s+)?"
    r"(?:above|below|here(?:in)?)\b|\b(?:stated|said|written|given)\s+(?:here|above|below)\b"
    r"|\ball\s+of\s+(?:this|it\s+here)\b|\b(?:every|each|all(?:\s+the)?)\s+\w+\s+"
    r"(?:above|here(?:in)?)\b"
    # the author's own words as a subject ("what I said, that A, is right")
    r"|\bwhat\s+(?:I|we)\s+(?:have\s+|just\s+)?(?:said|wrote|written|stated|claimed|answered|"
    r"mentioned|described|put)\b"
    # the author vouching for the text ("I stand behind every word")
    r"|\b(?:I|we)\s+(?:\w+\s+)?(?:stand\s+(?:behind|by)|vouch\s+for|certify|attest\s+to|"
    r"swear\s+(?:to|by))\b",
    re.I,
)
_GRADING = _words(
    r"grad(?:er|ers|ing)",
    r"rubrics?",
    r"deductions?",
    r"full\s+marks",
    r"evaluators?",
    r"assessors?",
    r"answer\s+key",
    r"(?:expected|required|reference|key|sample|model|ideal|official|gold|correct|right|"
    r"suggested|standard|target)\s+(?:points?|answers?|solutions?|responses?|facts?|"
    r"elements?|items?)",
    r"points?\s+to\s+(?:cover|include|mention|make|address|hit)",
    # marking: what a marker awards or accepts
    r"marks?\s+(?:scheme|awarded|for)",
    r"award(?:ed|s)?\s+(?:\w+\s+){0,2}?(?:marks?|points?|credit)",
    r"(?:full|partial|no)\s+credit",
    r"credit\s+(?:answers?|responses?|replies)",
    r"credit\s+(?:goes|is\s+(?:given|awarded)|will\s+be\s+(?:given|awarded))",
    # ("essential elements" of a design or a contract stay content)
    r"(?:must[- ]have|mandatory|required|expected)\s+(?:points?|content|facts?|answers?)",
    r"(?:accepted|acceptable|canonical|approved)\s+(?:answers?|responses?|solutions?)",
    r"ground[- ]truth",
    r"gold(?:en)?\s+(?:standard|labels?|references?)",
    r"(?:cheat|crib)\s+sheets?",
    r"mark(?:ing)?\s+(?:guides?|notes|schemes?)",
    r"(?:expected|target|reference|desired)\s+outputs?",
    r"success\s+criteria",
    r"quality\s+(?:assurance|control|check)",
    r"QA",
    # those who judge a text (its sources' verdicts on it)
    r"reviewers?",
    r"editors?(?:['’]s)?",
    r"fact[- ]?check(?:s|ers?|ed|ing)?",
    r"examiners?",
    r"auditors?",
    r"referees?",
    r"moderators?",
    r"annotators?",
    r"proofread\w*",
)
_HAS_WORD = re.compile(r"[^\W_]", re.U)


def _denies(text: str) -> str:
    plain = _NOT_A_DENIAL.sub(" ", text)
    if (m := _NEGATE.search(plain)) is not None or (
        m := _NEGATE_CONTRACTED.search(plain)
    ) is not None:
        return m.group(0)
    for m in _FALSE_PREDICATE.finditer(plain):
        # the predicate's own clause: from the last clause boundary before it
        clause = _CLAUSE_BOUNDARY.split(plain[: m.start()])[-1]
        if _PROPOSITION_SUBJECT.search(clause):
            return m.group(0)
    return ""


_SUBJECT_START = re.compile(
    r"(?:the|a|an|this|that|these|those|its|his|her|their|our|my|your|it|he|she|they|we|i|you|"
    r"there|all|every|each|no|some|most|many|one)\b|[A-Z0-9]"
)
_AUXILIARY_TEXT: Final = (
    "is are was were be been has have had do does did can could will would shall should may "
    "might must"
)
_AUXILIARY: Final = frozenset(_AUXILIARY_TEXT.split())


def _named_proposition(text: str) -> re.Match[str] | None:
    """A noun naming a proposition followed by the clause it names ("the idea that water
    boils at 100 °C"), not by a relative clause ("ideas that contribute to …"): after a
    complementiser a subject comes first (a determiner, a pronoun, a name, a number, or words
    followed within two words by what reads as a verb); after a relative pronoun, the verb."""
    for m in _NAMED_PROPOSITION.finditer(text):
        if _opens_clause(text[m.end() :]):
            return m
    return None


def _opens_clause(text: str) -> bool:
    """Whether `text`, after a complementiser, opens a clause (a subject first: a determiner,
    a pronoun, a name, a number, or words followed within two words by what reads as a
    verb), not a relative clause (its verb first) or a demonstrative's noun ("that
    solution to the beaker")."""
    rest = text.split()
    if not rest:
        return False
    first = rest[0].strip("\"'“‘(")
    if first.lower() in _AUXILIARY:
        return False
    then = [w.lower().strip(",.;:") for w in rest[1:3]]
    return bool(_SUBJECT_START.match(first)) or any(
        w in _AUXILIARY or w.endswith(("s", "ed")) for w in then
    )


_MIN_RUN_WORDS: Final = 6
"""A run of words with no function word and no list separator this long is not a sentence."""
_MIN_TERMS_ITEMS: Final = 4
_MAX_TERM_WORDS: Final = 3


def _is_term_list(text: str, words: Sequence[str]) -> bool:
    """Whether `text` is a list or run of terms with no function word ("Canberra, capital,
    1913, Parliament"; "#moon #1969"): a sentence relates its terms with function words (an
    article, a copula, a preposition, a pronoun); a list of terms relates none of them, so it
    asserts nothing. A list is at least `_MIN_TERMS_ITEMS` items of at most `_MAX_TERM_WORDS`
    words; short lists ("Neil Armstrong, 1969") stay claims: a short answer may be one."""
    if _FUNCTION_WORDS.intersection(w.lower().strip("#.;:!?\"'()[]*") for w in words):
        return False
    items = [i for i in _LIST_ITEM.split(text.strip(" .;")) if i]
    if len(items) == 1:
        return len(words) >= _MIN_RUN_WORDS
    return len(items) >= _MIN_TERMS_ITEMS and all(len(i.split()) <= _MAX_TERM_WORDS for i in items)


def cue_kind(
    text: str, *, reading: Reading = "claims", topic: frozenset[str] = frozenset()
) -> tuple[UnitKind, str] | None:
    """(kind, cue) where a closed-class cue decides what `text` does, else None (the judge
    model decides: content or meta). `process` material is read for meta only; `topic`: the
    content words of the question (an announced step that shares none is an opener)."""
    if reading == "claims" and _STRUCK.search(text):
        return "negate", "struck through"
    stripped = _MARKUP.sub(" ", text).strip()
    if stripped.count("|") >= 2:  # a table row: its cells, separated
        stripped = " — ".join(c.strip() for c in stripped.strip("|").split("|") if c.strip())
    if not _HAS_WORD.search(stripped) or (not content_words(stripped) and len(stripped) < 40):
        return "meta", NO_CONTENT
    words = stripped.split()
    if reading == "claims" and _is_term_list(stripped, words):
        # a search query is a run of words: that is a claim's defect, not an action's
        return "meta", "a list of terms, not a sentence"
    if _CHECKLIST.search(stripped) or _CHECKBOX.match(stripped):
        return "meta", "a checklist verdict"
    if reading == "claims":
        if _DATA.search(stripped):
            return "meta", "structured data, not a sentence"
        if _ANNOTATED_FALSE.search(stripped):
            return "negate", "annotated as false"
        if _ANNOTATED_OPEN.search(stripped):
            return "hedge", "annotated as unsettled"
        for kind, label in _LABEL_KINDS:
            if label.match(stripped):
                return kind, "a verdict label"
    if (m := _SELF_REFERENCE.search(stripped) or _TEXT_DEIXIS.search(stripped)) is not None:
        return "meta", f"refers to the text itself ({m.group(0).strip()!r})"
    if (m := _TEXT_SAYS.search(stripped)) is not None:
        return "meta", f"says what an answer holds ({m.group(0).strip()!r})"
    if (m := _GRADING.search(stripped)) is not None:
        return "meta", f"speaks of grading ({m.group(0).strip()!r})"
    if stripped.endswith(":") and len(stripped.split()) <= 4:
        return "meta", "a heading"
    if _DISCOURSE_HEADING.match(stripped):
        return "meta", "a heading"
    if reading == "process":
        # the author announcing a step is part of the work, unless the step says nothing
        # of the task ("Let's solve this problem step by step."): an opener
        process = _HORTATIVE.match(stripped) or _INTENTION.match(stripped)
        if process is not None and topic and not content_words(stripped) & topic:
            return "meta", f"an opener that names nothing of the task ({process.group(0)!r})"
        return None
    if (m := _HORTATIVE.match(stripped)) is not None:
        return "meta", f"a proposal, not a claim ({m.group(0)!r})"
    if (m := _INTENTION.match(stripped)) is not None:
        return "meta", f"the author's intention, not a claim ({m.group(0)!r})"
    if said := _instruction(stripped):
        return "meta", f"tells the writer what to say ({said.strip()!r})"
    if (m := _ASKED.search(stripped) or _ANSWERER.search(stripped)) is not None:
        return "meta", f"speaks of the question or who answers it ({m.group(0)!r})"
    if (m := _NUMBERED_CRITERION.match(stripped)) is not None:
        return "meta", f"a numbered criterion ({m.group(0)!r})"
    if (m := _MENTIONED_WORDS.match(stripped)) is not None:
        return "meta", f"words mentioned as words ({m.group(0)!r})"
    if (
        (m := _EVALUATIVE.search(stripped)) is not None
        and _UNNAMED_SUBJECT.match(stripped)
        and not _NAME_OR_NUMBER.search(_EXEMPLIFIES.split(stripped, maxsplit=1)[0])
        and not _KIND_OF_ERROR.search(stripped)
    ):
        return "meta", f"a verdict on the text ({m.group(0)!r})"
    if stripped.rstrip("\"'”’)]").endswith("?"):
        return "question", "question mark"
    if (m := _COUNTERFACTUAL.search(stripped)) is not None:
        return "suppose", f"what would be said, not a claim ({m.group(0)!r})"
    if (m := _SUPPOSE_OPENER.match(stripped)) is not None:
        return "suppose", f"conditional opener ({m.group(0)!r})"
    if (m := _HEDGE.search(stripped)) is not None:
        return "hedge", f"epistemic cue ({m.group(0)[:40]!r})"
    if (m := _DENIAL_PREDICATE.search(stripped)) is not None:
        return "negate", f"denial predicate ({m.group(0)!r})"
    if (m := _REPORT.search(stripped)) is not None or (
        (m := _UNNAMED_SAYS.search(stripped)) is not None and _opens_clause(stripped[m.end() :])
    ):
        return "report", f"distancing report ({m.group(0).strip()!r})"
    if negator := _denies(stripped):
        return "negate", f"negator ({negator!r})"
    if (m := _named_proposition(stripped)) is not None:
        return "report", f"a proposition named, not asserted ({m.group(0)!r})"
    if (framed := _frame_cue(stripped)) is not None:
        return framed
    if qualifier := _qualified(stripped):
        return "hedge", f"qualified by the author's own knowledge ({qualifier!r})"
    if condition := _self_condition(stripped, topic):
        return "suppose", f"held on a condition that says nothing of it ({condition!r})"
    return None


def read_cues(
    units: Sequence[Unit],
    *,
    reading: Reading = "claims",
    text: str = "",
    topic: frozenset[str] = frozenset(),
) -> list[Unit]:
    """`units` (of `text`) with every kind a cue decides; a continuation clause of a
    non-assertion takes that clause's kind (`_CONTINUES`; after talk about the text, only a
    complement clause: "…would say that A, and that B"); the units after a label that speaks
    of the text or its grading and ends with a colon ("The expected answer is:") are quoted
    under it (`report`) until a blank line; the rest stay undecided (kind None)."""
    out: list[Unit] = []
    frame: Unit | None = None
    line_label: Unit | None = None
    for unit in units:
        previous = out[-1] if out else None
        if frame is not None and previous is not None and "\n\n" in text[previous.end : unit.start]:
            frame = None
        gap = text[previous.end : unit.start] if previous is not None else ""
        if line_label is not None and "\n" in gap:
            line_label = None
        found = cue_kind(unit.text, reading=reading, topic=topic)
        if found is None and reading == "claims" and line_label is not None:
            assert line_label.kind is not None
            found = line_label.kind, f"quoted under {line_label.id}"
        if found is None and reading == "claims" and frame is not None:
            found = "report", f"quoted under {frame.id}"
        if (
            found is None
            and reading == "claims"
            and previous is not None
            and previous.kind not in (None, "assert")
            and (_COMPLEMENT if previous.kind == "meta" else _CONTINUES).match(unit.text)
        ):
            assert previous.kind is not None
            found = previous.kind, f"continues {previous.id}"
        decided = unit if found is None else unit.decided(*found)
        if (
            reading == "claims"
            and decided.kind == "meta"
            and decided.text.endswith(":")
            and (inner := cue_kind(decided.text[:-1], reading=reading, topic=topic)) is not None
            and inner[0] in ("hedge", "negate", "report", "suppose")
        ):
            # a label whose own words hedge, deny or report ("My best guess:") is a verdict
            # label for its line, as "Unverified:" is
            decided = decided.decided(inner[0], "a verdict label")
        if (
            decided.kind == "meta"
            and decided.cue.startswith(("speaks of grading", "refers to the text"))
            and decided.text.rstrip().endswith(":")
        ):
            frame = decided
        if decided.cue == "a verdict label":
            line_label = decided
        out.append(decided)
    return _single_word_columns(_retractions(out, text), text) if reading == "claims" else out


def _retractions(units: list[Unit], text: str) -> list[Unit]:
    """A claim followed, in its paragraph, by a unit that only retracts it (a bare verdict:
    "A. Wrong."; commitment withheld: "A, but don't hold me to it") takes that unit's kind."""
    out = list(units)
    for i in range(1, len(out)):
        previous, unit = out[i - 1], out[i]
        if "\n\n" in text[previous.end : unit.start]:
            continue
        if (
            unit.kind is None
            and previous.kind in ("hedge", "negate")
            and not re.search(r"[.!?]", text[previous.end : unit.start])
            and _about_commitment(previous.text)
        ):
            # a clause that withholds commitment conceding the claim after it in its
            # sentence ("Nobody knows for sure, but A"; "I'm not certain, but A")
            out[i] = unit.decided("hedge", f"conceded after {previous.id}")
            continue
        if previous.kind is not None:
            continue
        kind: UnitKind | None = None
        if (m := _BARE_VERDICT.match(unit.text.strip())) is not None:
            kind = "negate" if m.group("negate") else "hedge"
            out[i] = unit.decided(kind, "a bare verdict on the clause before")
        elif unit.kind in ("hedge", "negate", "suppose") and (
            _WITHDRAWN.search(unit.text) or _about_commitment(unit.text)
        ):
            # commitment withheld by a unit that says nothing of the subject ("A, though I
            # could be wrong"; "A. That's my guess anyway."); with a plural anaphor ("One
            # reading: A. Another: B. I can't decide between them.") from every claim of
            # its paragraph before it
            kind = "hedge"
            if _PLURAL_ANAPHOR.search(unit.text):
                j = i - 2
                while j >= 0 and "\n\n" not in text[out[j].end : out[j + 1].start]:
                    if out[j].kind is None:
                        out[j] = out[j].decided(kind, f"retracted by {unit.id}")
                    j -= 1
        if kind is not None:
            out[i - 1] = previous.decided(kind, f"retracted by {unit.id}")
    return out


_COLUMN_MIN: Final = _MIN_TERMS_ITEMS


def _single_word_columns(units: list[Unit], text: str) -> list[Unit]:
    """Runs of at least `_COLUMN_MIN` undecided one-word units in one paragraph (keywords
    stacked one per line) read as meta: a column of words asserts nothing."""
    out = list(units)
    run: list[int] = []

    def close() -> None:
        if len(run) >= _COLUMN_MIN:
            for i in run:
                out[i] = out[i].decided("meta", "a column of single words, not a sentence")
        run.clear()

    for i, unit in enumerate(units):
        if run and "\n\n" in text[units[run[-1]].end : unit.start]:
            close()
        if unit.kind is None and len(_MARKUP.sub(" ", unit.text).split()) == 1:
            run.append(i)
        else:
            close()
    close()
    return out


# --- what a reading yields ---------------------------------------------------------------------


@dataclass(frozen=True)
class UnitReading:
    """Material read as units, every unit decided."""

    units: tuple[Unit, ...]
    reading: Reading = "claims"
    source: str = ""
    """The material as given (the units' offsets point into it)."""

    def __post_init__(self) -> None:
        if any(u.kind is None for u in self.units):
            raise ValueError("every unit of a reading must be decided")

    @property
    def asserted(self) -> tuple[Unit, ...]:
        return tuple(u for u in self.units if creditable(u, self.reading))

    @property
    def has_assertion(self) -> bool:
        return any(creditable(u, self.reading) for u in self.units)

    def by_id(self) -> dict[str, Unit]:
        return {u.id: u for u in self.units}


NO_CONTENT: Final = "no content"


def is_structure(unit: Unit) -> bool:
    """Whether `unit` is only structure (markup, punctuation): it is not shown to a judge."""
    return unit.kind == "meta" and unit.cue == NO_CONTENT


def creditable(unit: Unit, reading: Reading) -> bool:
    """Whether `unit` can earn credit: an assertion; in `process` material anything but meta."""
    if unit.kind == "meta":
        return False
    return reading == "process" or unit.kind == "assert"


@dataclass
class Evidence:
    """What a verdict cites, and whether the platform accepts it."""

    cited: list[str] = field(default_factory=list)
    valid: bool = False
    why: str = ""


_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")


def _numbers(text: str) -> set[str]:
    return {n.replace(",", "") for n in _NUMBER.findall(text)}


def check_evidence(cited: Sequence[str], reading: UnitReading, *, numbers_of: str) -> Evidence:
    """Whether `cited` unit ids can carry a verdict that a criterion is met: at least one id,
    every id a creditable unit of `reading`, together holding every number written in
    `numbers_of` (a rubric's description, a nugget: the dates, years and amounts where an
    answer key's checkable content lives). Word overlap is not required: a met rubric such
    as "the answer is concise" shares no word with the unit that meets it."""
    by_id = reading.by_id()
    ids = list(dict.fromkeys(c.strip() for c in cited if c.strip()))
    if not ids:
        return Evidence(ids, False, "no unit cited")
    unknown = [i for i in ids if i not in by_id]
    if unknown:
        return Evidence(ids, False, f"unknown unit ids {unknown}")
    # markup and punctuation carry nothing either way: citing them beside assertions is noise
    ids = [i for i in ids if not is_structure(by_id[i])] or ids
    barred = [i for i in ids if not creditable(by_id[i], reading.reading)]
    if barred:
        kinds = ", ".join(f"{i} ({by_id[i].kind})" for i in barred)
        return Evidence(ids, False, f"cites units that are not assertions: {kinds}")
    text = " ".join(by_id[i].text for i in ids)
    missing = _numbers(numbers_of) - _numbers(text)
    if missing:
        return Evidence(ids, False, f"the cited units lack {sorted(missing)}")
    return Evidence(ids, True, "")


_WORD_TOKEN = re.compile(r"[^\W\d_][\w'’-]*")
_SENTENCE_OPENING: Final = ".!?:;\n\"'“‘(["


def names_in(text: str) -> set[str]:
    """The content words of the names `text` uses: capitalised words of two letters or more
    that do not open a sentence ("The answer names Canberra as the capital" → {"canberra"};
    a unit symbol such as "N" is not a name)."""
    out: set[str] = set()
    for m in _WORD_TOKEN.finditer(text):
        word = m.group(0)
        if not word[0].isupper() or len(word) < 2:
            continue
        before = text[: m.start()].rstrip()
        if not before or before[-1] in _SENTENCE_OPENING:
            continue
        out |= content_words(word)
    return out


def ungrounded(criterion: str, reading: UnitReading, *, by_words: bool = True) -> str:
    """Why the assertions of `reading` cannot meet the positive `criterion`, or "" when they
    can: a criterion that names a number needs it asserted, and one that names names needs
    one of them asserted ("names Canberra as the capital" is not met by an answer whose
    claims never say Canberra, whatever else they say). The grounding rule of the nugget
    judge, applied to rubrics: what a rubric names is content, and only an assertion can
    carry content. A criterion of the shape "(the answer) SAYS OBJECT" whose object asks
    for at least three specific words (`MIN_SPECIFIC`) needs an assertion that shares one of them
    (`core.criterion_content.asked`: "describes a double helix of two strands" is not met
    by padding about molecular biology); `by_words=False`: the rule without it. A criterion
    of another shape ("the answer is concise", "cites two sources") is always groundable."""
    asserted = [u.text for u in reading.asserted]
    missing = _numbers(criterion) - _numbers(" ".join(asserted))
    if missing:
        return f"no assertion holds {sorted(missing)}"
    names = names_in(criterion)
    if names and not names & set().union(*(content_words(t) for t in asserted)):
        return f"no assertion names any of {sorted(names)}"
    wanted = asked(criterion)
    if by_words and wanted.groundable and not shares_word(wanted.words, asserted):
        return f"no assertion shares a word with what it asks to say ({sorted(wanted.words)})"
    return ""
