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

import re
import unicodedata
from collections.abc import Sequence
from typing import Final

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


def strip_invisible(text: str) -> str:
    """`text` without Unicode format characters (zero-width, bidi controls, BOM)."""
    return "".join(c for c in text if unicodedata.category(c) != "Cf")


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
)


def manipulation_markers(text: str) -> list[str]:
    """What in `text` addresses the judge rather than the task: prompt fence tags,
    chat-template control tokens, text after a closed `</answer>`, system/assistant lines, a
    forged score sheet, score demands to the grader (in several languages). Empty for
    ordinary material. Invisible characters are ignored, so they cannot split a marker."""
    visible = strip_invisible(text)
    found: list[str] = []
    for name, pattern in MARKERS:
        if name not in found and pattern.search(visible):
            found.append(name)
    return found


def clip(text: str, *, max_chars: int) -> str:
    """Keep head and tail of an over-long text, with a visible marker in between."""
    if len(text) <= max_chars:
        return text
    head = max_chars * 2 // 3
    tail = max_chars - head
    omitted = len(text) - head - tail
    return f"{text[:head]}\n[... {omitted} characters omitted ...]\n{text[-tail:]}"
