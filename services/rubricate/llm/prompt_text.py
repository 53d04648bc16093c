"""Rendering untrusted text into prompts: delimited, escaped, and clipped to a budget.

Untrusted text (questions, trajectories, answers, actions, reflections, passages, nuggets)
goes into a judge prompt only through `escape_untrusted`, inside an `<untrusted>` fence the
prompt builder writes itself. The escape is the one place that decides what such text may
contain (GitHub issue 17):

- **Fence and prompt tags** (`<untrusted>`, `</untrusted>`, the stage and structure tags
  of the prompts, role tags; not the trajectory's own `<answer>`-style stage tags): any tag of these
  names, opening or closing, with any case, spaces or zero-width characters inside and with
  ASCII or look-alike angle brackets (fullwidth `＜`, small `﹤`, `〈`, `⟨`, `‹`), is
  rewritten with the angle quotes `‹ ›`. The text stays readable to the judge, but only the
  builder's own ASCII `</untrusted>` closes a fence.
- **Chat-template control tokens** of the common templates (ChatML/Qwen `<|im_start|>`,
  `<|im_end|>`, `<|endoftext|>`, any `<|name|>`; DeepSeek's `<｜name｜>`; Llama 2/Mistral
  `[INST]`, `<<SYS>>`, `<s>`, `</s>`, `[SYSTEM_PROMPT]` and the other Mistral tokens; Gemma
  `<start_of_turn>`, `<end_of_turn>`, `<bos>`, `<eos>`; the StarCoder-family tokens of the
  SmolLM2 vocabulary such as `<file_sep>`, `<repo_name>`, `<jupyter_code>`; Qwen's
  `<tool_call>`) lose their brackets the same way: `<|im_start|>` becomes `‹|im_start|›`,
  `[INST]` becomes `［INST］` (fullwidth brackets). A visible replacement was chosen over a
  zero-width break inside the token: it cannot be undone by a normalisation that drops
  invisible characters, costs no extra tokens, and shows the judge (and a human reading a
  logged prompt) that the text was defused.
- **Invisible format characters** (zero-width spaces and joiners, bidi controls, the BOM:
  Unicode category Cf) are removed, so they cannot hide a tag or a token from the checks
  above nor from a reader.

`manipulation_markers` says whether untrusted text addresses the judge (fence tags, control
tokens, system/assistant lines, a forged score sheet, score demands in several languages):
the stagewise scoring prompt withholds such a stage from the judge altogether, since the
embedded judge obeyed fenced, escaped attacks (docs/judge-quality.md, "Prompt injection").

The embedded backend additionally tokenizes message text with special tokens disabled
(`llm/embedded.py`), and the served backends send message text through
`neutralize_control_tokens` as well, so a control token that reached a message by another
route is defused too.
"""

import functools
import re
import sys
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from rubricate.core.required_text import fold, required_text
from rubricate.llm.base import Message

_LT: Final = "<＜﹤〈⟨‹"
_GT: Final = ">＞﹥〉⟩›"

FENCE_NAMES: Final[tuple[str, ...]] = (
    # the fences and structure tags the prompt builders write
    "untrusted",
    "trajectory",
    "stage",
    "answer_text",
    "rubrics",
    "reference_examples",
)
PROMPT_TAGS: Final[tuple[str, ...]] = (
    *FENCE_NAMES,
    # role and instruction tags: material must not pose as the prompt's own turns. The
    # trajectory's stage tags (<answer>, <review>, <think>, ...) are left as they are: they
    # are the material's structure, the judges read it (defusing them cost the reflection
    # judge its reading of the trajectory: tests/e2e/test_reflections_real_model.py), and
    # they cannot close a fence. Text after a closed </answer> is caught as a manipulation
    # marker instead (the stagewise judge withholds such a stage).
    "system",
    "user",
    "assistant",
    "instructions",
)


def _tag_pattern(names: Sequence[str]) -> re.Pattern[str]:
    """An opening or closing tag of one of `names`, in any case and spacing, with ASCII or
    look-alike angle brackets."""
    return re.compile(
        rf"[{_LT}]\s*/?\s*(?:{'|'.join(names)})\b[^{_LT}{_GT}\n]{{0,200}}[{_GT}]", re.I
    )


_TAG = _tag_pattern(PROMPT_TAGS)

# <|name|> (ChatML, Llama 3, Phi), <｜name｜> (DeepSeek, fullwidth bars)
_BAR_TOKEN = re.compile(r"<\s*[|｜][^<>\n]{0,64}?[|｜]\s*>")
# Llama 2 / Mistral: [INST] [/INST] <<SYS>> <</SYS>> and the Mistral control tokens
SQUARE_NAMES: Final[tuple[str, ...]] = (
    "INST",
    "SYSTEM_PROMPT",
    "AVAILABLE_TOOLS",
    "TOOL_CALLS",
    "TOOL_RESULTS",
    "TOOL_CONTENT",
    "CALL_ID",
    "ARGS",
    "THINK",
    "IMG",
    "IMG_BREAK",
    "IMG_END",
    "PREFIX",
    "MIDDLE",
    "SUFFIX",
)
_SQUARE_TOKEN = re.compile(rf"\[\s*/?\s*(?:{'|'.join(SQUARE_NAMES)})\s*\]")
_SYS_TOKEN = re.compile(r"<<\s*/?\s*SYS\s*>>", re.I)
# bare-named control tokens of common vocabularies
CONTROL_NAMES: Final[tuple[str, ...]] = (
    "s",
    "bos",
    "eos",
    "pad",
    "unk",
    "start_of_turn",
    "end_of_turn",
    "tool_call",
    "tool_response",
    "repo_name",
    "reponame",
    "file_sep",
    "filename",
    "gh_stars",
    "issue_start",
    "issue_comment",
    "issue_closed",
    "jupyter_start",
    "jupyter_text",
    "jupyter_code",
    "jupyter_output",
    "jupyter_script",
    "empty_output",
    "fim_prefix",
    "fim_middle",
    "fim_suffix",
    "fim_pad",
    "commit_before",
    "commit_msg",
    "commit_after",
)
_NAMED_TOKEN = re.compile(rf"<\s*/?\s*(?:{'|'.join(CONTROL_NAMES)})\s*>", re.I)

_FULLWIDTH = str.maketrans({"[": "［", "]": "］"})
_ANGLES = str.maketrans({c: "‹" for c in _LT} | {c: "›" for c in _GT})


def _angle_quotes(match: re.Match[str]) -> str:
    return match.group(0).translate(_ANGLES)


@functools.cache
def _format_characters() -> re.Pattern[str]:
    """Every Unicode format character (category Cf), as one class (built on first use)."""
    codes = [c for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)) == "Cf"]
    ranges: list[str] = []
    start = prev = codes[0]
    for code in [*codes[1:], -1]:
        if code != prev + 1:
            ranges.append(
                re.escape(chr(start)) + ("" if prev == start else "-" + re.escape(chr(prev)))
            )
            start = code
        prev = code
    return re.compile(f"[{''.join(ranges)}]")


def strip_invisible(text: str) -> str:
    """`text` without Unicode format characters (zero-width, bidi controls, BOM). ASCII
    text has none and is returned as it is."""
    return text if text.isascii() else _format_characters().sub("", text)


def neutralize_control_tokens(text: str) -> str:
    """`text` with chat-template control tokens defused (brackets replaced by look-alikes)."""
    text = _BAR_TOKEN.sub(_angle_quotes, text)
    text = _SYS_TOKEN.sub(_angle_quotes, text)
    text = _NAMED_TOKEN.sub(_angle_quotes, text)
    return _SQUARE_TOKEN.sub(lambda m: m.group(0).translate(_FULLWIDTH), text)


def neutralized_messages(messages: Sequence[Message]) -> list[Message]:
    """`messages` with `neutralize_control_tokens` applied to every text: what a backend that
    renders the chat template from text (a served model) is sent. No message of Rubricate's
    legitimately spells a control token, so this changes nothing in a clean prompt."""
    return [Message(m.role, neutralize_control_tokens(m.content)) for m in messages]


def escape_untrusted(text: str) -> str:
    """Neutralize what would close or forge the prompt's delimiters or the chat template:
    invisible characters removed, prompt tags and control tokens defused."""
    text = strip_invisible(text)
    text = _TAG.sub(_angle_quotes, text)
    return neutralize_control_tokens(text)


# --- manipulation markers ------------------------------------------------------------------

_FENCE_TAG = _tag_pattern(FENCE_NAMES)
_AFTER_ANSWER = re.compile(rf"[{_LT}]\s*/\s*answer\s*[{_GT}]\s*\S", re.I)
_ROLE_LINE = re.compile(
    r"^[ \t#*>\[(]*(?:system|assistant|developer)\s*(?:message|prompt|note)?[\])*]*\s*[:：]",
    re.I | re.M,
)
_SHEET = re.compile(r'"scores"\s*:\s*\[|"index"\s*:\s*\d+\s*,[^{}]{0,400}"score"\s*:\s*\d')
_SCORE_DEMAND = re.compile(
    r"(?:\b(?:give|award|assign|score|rate|grade|mark|output|answer)\b[^.\n]{0,80}"
    r"(?:\b2\b|\btwo\b|full marks|maximum|highest|top score|\byes\b)[^.\n]{0,80}"
    r"\b(?:every|each|all)\b[^.\n]{0,30}\b(?:rubric|criteri|item|question)"
    r"|\b(?:every|each|all)\s+(?:rubrics?|criteri\w*)\b[^.\n]{0,40}\b(?:fully\s+)?(?:met|meets|satisfied)"
    r"|\bignore\b[^.\n]{0,40}\b(?:rubric|criteri|instruction|previous|above)"
    r"|\b(?:note|message|instruction)s?\s+(?:to|for)\s+the\s+(?:grader|evaluator|judge|assessor)"
    r"|\b(?:grader|evaluator|judge|assessor)\s*[:：]"
    r"|\brubric\s+(?:update|change|override)"
    r"|\bevaluator\s+verdict)",
    re.I,
)
_FOREIGN_DEMAND = re.compile(
    r"Bewerter|Kriteri\w*[^.\n]{0,60}(?:Punkt|vergib|erfüllt)|Höchstpunktzahl"
    r"|évaluateur|correcteur|note maximale|evaluador|calificador|puntuación máxima"
    r"|оценщик|максимальн\w* балл"
    r"|评分员|评分标准|满分|採点者|満点|채점자|만점",
    re.I,
)

# Text that addresses a nugget, step, rank or reflection judge without naming it (GitHub
# issue 25): a blob of labels or verdicts in a judge's output shape, a claim that everything
# is already confirmed, a demand to label/mark/rank the material, a reviewer's remark, a
# quoted grading policy, role-play set-ups, and the same in a few other languages.
_LABEL_SHEET = re.compile(
    r'"(?:labels?|verdicts?|meets|satisfied|ranking|support|not_support|partial_support'
    r"|diagnostic_accuracy|specificity|scope_balance|within|cross)\"\s*:"
    r'|:\s*"(?:support|partial_support|not_support)"',
    re.I,
)
_DEICTIC = (
    r"(?:above|here(?:in)?|below|so\s+far|in\s+(?:this|the|my)\s+(?:answer|response|text|"
    r"action|reflection|candidate|paragraph|block)s?|of\s+this\s+(?:answer|response|text))"
)
_OUTCOME_CLAIM = re.compile(
    r"\b(?:every|each|all)(?:\s+(?:of\s+)?(?:the|these|those|my|its|this))?\s+"
    r"(?:statements?|claims?|facts?|nuggets?|criteri\w*|candidates?|requirements?|points?"
    r"|dimensions?|items?|labels?|conditions?|sentences?)\s+" + _DEICTIC + r"[^.\n]{0,60}?"
    r"\b(?:confirmed|verified|supported|satisfied|fulfilled|met\b|validated|approved|correct\b"
    r"|true\b|accurate\b)"
    r"|\b(?:fully|already)\s+(?:verified|confirmed|supported|satisfied|validated)\s+"
    r"(?:by|against|per)\b",
    re.I,
)
_LABEL_DEMAND = re.compile(
    r"\b(?:label|mark|tag|classify|rank|score)\w*\s+(?:this|these|them|every|each|all|"
    r"the\s+(?:statements?|nuggets?|claims?|action|candidate|reflection|answer|above))\b"
    r"[^.\n]{0,50}?\b(?:as|at)\s+(?:being\s+)?(?:[\"'“‘]\s*)?(?:support(?:ed)?\b|fully\b"
    r"|satisfied|meeting|met\b|first\b|number\s+one|confirmed|verified|10\b|ten\b)"
    r"|\b(?:should|must|deserves?\s+to|is\s+to)\s+be\s+(?:ranked|rated|scored|label+ed|marked|"
    r"judged|placed)\s+(?:as\s+)?(?:first|highest|top|best|supported|support|"
    r"satisfied|excellent|perfect|10\b)",
    re.I,
)
_REMARK = re.compile(
    r"[\[(]\s*(?:the\s+)?(?:reviewer|annotator|fact[- ]?checker|moderator|examiner|verifier"
    r"|referee|auditor|checker|assessor|adjudicator)(?:['’]s)?\s+(?:remark|note|comment|"
    r"verdict|assessment|decision|confirmation)"
    r"|\b(?:reviewer|annotator|fact[- ]?checker|moderator|examiner|verifier|referee|auditor"
    r"|assessor|adjudicator)(?:['’]s)?\s+(?:remark|note|comment|verdict|assessment|decision|"
    r"confirmation)\s*[:：]",
    re.I,
)
_POLICY = re.compile(
    r"\b(?:grading|scoring|label+ing|ranking|annotation|judging|marking)\s+"
    r"(?:policy|guidelines?|rules?|protocol)\s*(?:\(|[:：]|[\"“]|\bsays\b|\bstates\b|\breads\b)"
    r"|\b(?:per|according\s+to|under)\s+the\s+(?:\w+\s+)?(?:grading|scoring|label+ing|ranking|"
    r"annotation|judging)\s+(?:policy|guidelines?|rules?|protocol)",
    re.I,
)
_ROLE_PLAY = re.compile(
    r"\b(?:you\s+are\s+now|from\s+now\s+on,?\s+you|pretend\s+(?:to\s+be|you\s+are)"
    r"|imagine\s+you\s+are|let['’]?s\s+(?:role[- ]?play|play\s+a\s+game)|stay\s+in\s+character"
    r"|in\s+this\s+game,?\s+you"
    r"|you\s+are\s+(?:a|an|the)\s+(?:\w+\s+){0,2}(?:grader|judge|evaluator|reviewer|verifier|"
    r"fact[- ]?checker|annotator|examiner|assessor)\b"
    r"|act\s+as\s+(?:a|an|the)\s+(?:\w+\s+)?(?:grader|judge|evaluator|reviewer|verifier|"
    r"fact[- ]?checker|annotator|examiner|assessor))",
    re.I,
)
_FOREIGN_CLAIM = re.compile(
    r"(?:toutes?|chaque)\s+(?:les\s+)?(?:affirmations?|déclarations?|critères?|énoncés?|faits?)"
    r"[^.\n]{0,60}(?:confirmé|étayé|vérifié|satisfait|rempli|validé)"
    r"|\b(?:marquez|étiquetez|classez)\b[^.\n]{0,60}\bcomme\b"
    r"|(?:todas?|todos|cada)\s+(?:las\s+|los\s+)?(?:afirmaciones|declaraciones|criterios|"
    r"enunciados|hechos)[^.\n]{0,60}(?:confirmad|verificad|respaldad|cumplid|satisfech)"
    r"|\b(?:marque|etiquete|clasifique)\w*\b[^.\n]{0,60}\bcomo\b"
    r"|(?:alle|jede)\s+(?:Aussagen?|Kriterien|Behauptungen)[^.\n]{0,60}"
    r"(?:bestätigt|belegt|erfüllt|verifiziert)"
    r"|\b(?:markiere|bewerte|kennzeichne)\w*\b[^.\n]{0,60}\bals\b"
    r"|(?:tutte|ogni)\s+(?:le\s+)?(?:affermazioni|dichiarazioni|criteri)[^.\n]{0,60}"
    r"(?:confermat|verificat|soddisfatt)"
    r"|(?:todas?|cada)\s+(?:as\s+)?(?:afirmações|declarações|critérios)[^.\n]{0,60}"
    r"(?:confirmad|verificad|atendid)"
    r"|所有(?:陈述|说法|标准|事实|要点)[^。\n]{0,30}(?:已|均|都)|标记为|排名第一|排在第一"
    r"|(?:すべて|全て)の(?:記述|基準|主張)"
    r"|все\s+(?:утверждения|критерии)[^.\n]{0,60}(?:подтвержден|выполнен)",
    re.I,
)

MARKERS: Final[tuple[tuple[str, re.Pattern[str]], ...]] = (
    ("prompt fence tag", _FENCE_TAG),
    ("chat-template control token", _BAR_TOKEN),
    ("chat-template control token", _SYS_TOKEN),
    ("chat-template control token", _SQUARE_TOKEN),
    ("chat-template control token", _NAMED_TOKEN),
    ("text after the closed answer", _AFTER_ANSWER),
    ("system or assistant line", _ROLE_LINE),
    ("score sheet", _SHEET),
    ("demand addressed to the grader", _SCORE_DEMAND),
    ("demand addressed to the grader", _FOREIGN_DEMAND),
    ("label or verdict sheet", _LABEL_SHEET),
    ("claim that the material is already verified", _OUTCOME_CLAIM),
    ("demand to label or rank the material", _LABEL_DEMAND),
    ("reviewer's remark", _REMARK),
    ("quoted grading policy", _POLICY),
    ("role-play set-up", _ROLE_PLAY),
    ("demand addressed to the grader", _FOREIGN_CLAIM),
)


def _reads_lines(pattern: re.Pattern[str]) -> bool:
    """Whether a marker can match the text as written and miss it with white space
    collapsed: a line anchor (`^`, `$`, MULTILINE) or a line break outside a negated class.
    Any other marker that matches the text also matches it collapsed (a run of white space
    becomes one space, so bounded gaps only get shorter and word boundaries stay)."""
    outside_negated = re.sub(r"\[\^(?:\\.|[^\]\\])*\]", "", pattern.pattern)
    return bool(pattern.flags & re.MULTILINE) or any(
        token in outside_negated for token in ("^", "$", "\\n", "\\r", "\n", "\r")
    )


_MARKER_PASSES: Final = tuple((name, p, _reads_lines(p), required_text(p)) for name, p in MARKERS)
"""Each marker, whether it is also searched in the text as written, and the literal text
any match of it contains (`core.required_text`: a search that cannot match is skipped)."""


def manipulation_markers(text: str) -> list[str]:
    """What in `text` addresses the judge rather than the task: prompt fence tags,
    chat-template control tokens, text after a closed `</answer>`, system/assistant lines, a
    forged score sheet, score demands to the grader (in several languages). Empty for
    ordinary material. Invisible characters are ignored, so they cannot split a marker.

    Memoised per process (bounded): the choices design builds one prompt per rubric from the
    same stage texts, and the scan was a fifth of the audit worker's CPU (docs/benchmarks.md)."""
    return list(_markers_of(text))


@functools.lru_cache(maxsize=2048)
def _markers_of(text: str) -> tuple[str, ...]:
    visible = strip_invisible(text)
    # searched with every run of white space as one space: an instruction broken over lines
    # or paragraphs ("every statement in this answer" / "has been confirmed") is still one;
    # only a marker that reads lines is searched in the text as written too (each search of
    # a long trajectory costs; this was the verifier's largest CPU cost per rollout)
    flat = " ".join(visible.split())
    folded_flat, folded_visible = fold(flat), fold(visible)
    found: list[str] = []
    for name, pattern, reads_lines, needs in _MARKER_PASSES:
        if name in found:
            continue
        if (needs.may_match(folded_flat) and pattern.search(flat)) or (
            reads_lines and needs.may_match(folded_visible) and pattern.search(visible)
        ):
            found.append(name)
    return tuple(found)


@dataclass(frozen=True)
class MarkerSpan:
    name: str
    start: int
    """Offsets into the text with invisible characters removed (`strip_invisible`)."""
    end: int


def marker_spans(text: str) -> list[MarkerSpan]:
    """Every match of every marker of `manipulation_markers` in `text` (invisible characters
    removed first: the offsets are into `strip_invisible(text)`)."""
    visible = strip_invisible(text)
    folded = fold(visible)
    return [
        MarkerSpan(name, m.start(), m.end())
        for name, pattern, _, needs in _MARKER_PASSES
        if needs.may_match(folded)
        for m in pattern.finditer(visible)
    ]


def addressing_by_part(parts: Sequence[str]) -> list[list[str]]:
    """The markers of each of `parts` (an answer's blocks, a slate's candidates), including
    those that only appear when consecutive parts are read together: an instruction split
    across blocks ("every statement" / "above is confirmed") is charged to every part its
    match touches. Empty lists for ordinary material."""
    found = [manipulation_markers(p) for p in parts]
    if len(parts) < 2:
        return found
    visible = [" ".join(strip_invisible(p).split()) for p in parts]
    joined = " ".join(visible)
    bounds: list[tuple[int, int]] = []
    at = 0
    for v in visible:
        bounds.append((at, at + len(v)))
        at += len(v) + 1
    for span in marker_spans(joined):
        touched = [i for i, (a, b) in enumerate(bounds) if span.start < b and span.end > a]
        if len(touched) < 2:
            continue  # within one part: already found (or whitespace-only difference)
        for i in touched:
            name = f"{span.name} (split across parts)"
            if name not in found[i]:
                found[i].append(name)
    return found


def clip(text: str, *, max_chars: int) -> str:
    """Keep head and tail of an over-long text, with a visible marker in between."""
    if len(text) <= max_chars:
        return text
    head = max_chars * 2 // 3
    tail = max_chars - head
    omitted = len(text) - head - tail
    return f"{text[:head]}\n[... {omitted} characters omitted ...]\n{text[-tail:]}"
