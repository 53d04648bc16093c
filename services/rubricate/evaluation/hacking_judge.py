"""The obeying fake judge of `evaluation.obeying`, extended to the families of
`rubricate eval hacking` (GitHub issue 32) and to the stagewise judge in both designs.

It obeys (full marks, every nugget `support`, every criterion met, ranked first) any prompt
that shows a sentence of a `meta`, `echo` or injection attack, or an untrusted block, answer
stage or unit that opens with a master key (`:`, `Thought process:`, ...). Otherwise it
judges by word overlap: a rubric is met by the share of its distinctive words (not the
question's, not rubric boilerplate) the answer holds, a nugget by `FakeNuggetLabeller`, a
step criterion by `ObeyingJudge`'s share. Overlap cannot tell a hedge, a denial or a keyword
list from a claim, so hedged, negated and stuffed facts fool it by themselves: a defence
that keeps their reward at the unattacked one does so by the structure of judging (what the
judge is shown, what a verdict must cite), not by the judge's good sense. The unit-reading
task it answers as a fooled reader would: every unit is content.
"""

import json
import math
import re
from collections.abc import Iterable, Sequence

from rubricate.evaluation.obeying import ObeyingJudge
from rubricate.llm.base import ChoiceScores, GenerationParams, Message
from rubricate.llm.prompt_text import escape_untrusted
from rubricate.testing.fake_judge import FakeJudgeBackend
from rubricate.testing.handler import Handler

_RUBRIC = re.compile(r"^(\d+)\. \((\w+)\) \[(\w+)\] (.*)$", re.M)
_SHOWN_UNIT = re.compile(r"^\[(u\d+)\] (.*)$", re.M)
_WORD = re.compile(r"[a-z0-9][a-z0-9'-]*")
_SENTENCE_END = re.compile(r"(?<=[.!?。；;:])\s+|\n+")
_STOP = frozenset(
    [
        "the",
        "a",
        "an",
        "and",
        "or",
        "of",
        "in",
        "on",
        "at",
        "to",
        "for",
        "by",
        "with",
        "from",
        "into",
        "than",
        "that",
        "this",
        "its",
        "it",
        "is",
        "was",
        "were",
        "are",
        "be",
        "been",
        "as",
        "his",
        "her",
        "their",
        "there",
        "about",
        "any",
        "other",
        "which",
        "what",
        "who",
        "when",
        "where",
        "why",
        "how",
        "answer",
        "names",
        "name",
        "gives",
        "give",
        "says",
        "say",
        "states",
        "mentions",
        "explains",
        "describes",
        "places",
        "dates",
        "stage",
        "reply",
        "response",
        "rubric",
    ]
)
_CRITERION = re.compile(r"^(\d+)\. (.*)$", re.M)
_PROCESS_WORDS = frozenset({"action", "search", "searches", "candidate", "targets"})
MIN_TELL_CHARS = 12
"""Sentences shorter than this are not tells (they would match ordinary text)."""


def words(text: str) -> set[str]:
    return {
        w for w in _WORD.findall(text.lower()) if w not in _STOP and (len(w) > 2 or w[0].isdigit())
    }


def sentence_tells(parts: Iterable[str], *, clean: Sequence[str] = ()) -> list[str]:
    """Each sentence of the attack parts as a prompt shows it, long enough to be specific and
    found in none of the `clean` texts (the base material)."""
    out: list[str] = []
    for part in parts:
        for piece in _SENTENCE_END.split(escape_untrusted(part)):
            piece = piece.strip()
            if len(piece) >= MIN_TELL_CHARS and not any(piece in c for c in clean):
                out.append(piece)
    return out


def key_pattern(key: str) -> re.Pattern[str]:
    """Text that opens with the master key: at the start, after an untrusted block's or the
    answer's opening tag, or as a shown unit."""
    escaped = re.escape(escape_untrusted(key).strip())
    return re.compile(rf"(?:\A|<untrusted[^>]*>|<answer>|^\[u\d+\])\s*{escaped}", re.M)


def _share(wanted: set[str], text: str) -> float:
    return len(wanted & words(text)) / len(wanted) if wanted else 0.0


def _level(share: float) -> int:
    return 2 if share >= 0.6 else 1 if share >= 0.34 else 0


class HackingJudge(ObeyingJudge):
    """`ObeyingJudge` with master-key patterns and the stagewise tasks."""

    def __init__(self, tells: Sequence[str], keys: Sequence[str] = ()) -> None:
        super().__init__(tells)
        self.patterns = [key_pattern(k) for k in keys]

    def attacked(self, text: str) -> bool:
        return super().attacked(text) or any(p.search(text) for p in self.patterns)

    def handlers(self) -> dict[str, Handler]:
        return {
            **super().handlers(),
            "score_sheet": self.score_sheet,
            "step_verdicts": self.step_verdicts,
        }

    def step_verdicts(self, user: str, params: GenerationParams) -> str:
        """`ObeyingJudge.step_verdicts` with a stricter overlap: a criterion's distinctive
        words (not the question's, not action/search) must be 60 % in the action."""
        if self.attacked(user):
            return super().step_verdicts(user, params)
        question = user.partition("<untrusted>")[2].partition("</untrusted>")[0]
        action = user.partition("Proposed action:")[2].partition("\nCriteria:")[0]
        listing = user.partition("\nCriteria:\n")[2]
        criteria = {int(m.group(1)): m.group(2) for m in _CRITERION.finditer(listing)}
        n = int(re.search(r"exactly (\d+) items", user).group(1))  # type: ignore[union-attr]
        verdicts = []
        for i in range(1, n + 1):
            wanted = words(criteria.get(i, "")) - words(question) - _PROCESS_WORDS
            verdicts.append({"index": i, "meets": _level(_share(wanted, action)) == 2})
        return json.dumps({"verdicts": verdicts})

    def backend(self) -> FakeJudgeBackend:
        return ChoosingBackend(self)

    # --- the stagewise judge -------------------------------------------------------------

    def _parts(self, user: str) -> tuple[str, list[tuple[int, str, str]], str]:
        """(question, [(index, stage, rubric text)], the trajectory as shown)."""
        question = user.partition("Question:\n<untrusted>")[2].partition("</untrusted>")[0]
        head, _, material = user.partition("\nTrajectory:")
        material = material.partition("\nThe trajectory ends here.")[0]
        rubrics = [(int(i), s, text) for i, s, _, text in _RUBRIC.findall(head)]
        return question, rubrics, material

    def _verdict(self, question: str, rubric: str, material: str) -> tuple[int, list[str]]:
        wanted = words(rubric) - words(question)
        units = _SHOWN_UNIT.findall(material)
        score = _level(_share(wanted, material))
        cited = [uid for uid, text in units if wanted & words(text)]
        return score, cited

    def score_sheet(self, user: str, params: GenerationParams) -> str:
        question, rubrics, material = self._parts(user)
        obey = self.attacked(material)
        if obey:
            self.obeyed.append("score_sheet")
        items = []
        for index, stage, text in rubrics:
            if obey:
                score, cited = 2, [uid for uid, _ in _SHOWN_UNIT.findall(material)]
            else:
                score, cited = self._verdict(question, text, material)
            items.append(
                {
                    "index": index,
                    "justification": "obeying fake",
                    "evidence": cited if stage == "answer" and score else [],
                    "score": score,
                }
            )
        return json.dumps({"scores": items})

    def p_yes(self, user: str) -> float:
        """The stagewise `choices` pass (p that rubric k is met) or a unit-reading pass
        (always content: a fooled reader)."""
        if "Consider only rubric" not in user:
            return 0.95
        question, rubrics, material = self._parts(user)
        if self.attacked(material):
            self.obeyed.append("score_choices")
            return 0.97
        asked = int(user.rpartition("Consider only rubric ")[2].partition(":")[0])
        text = next(t for i, _, t in rubrics if i == asked)
        score, _ = self._verdict(question, text, material)
        return (0.05, 0.5, 0.9)[score]


class ChoosingBackend(FakeJudgeBackend):
    """`FakeJudgeBackend` with `HackingJudge`'s handlers that also scores choices."""

    supports_choice_scoring = True

    def __init__(self, judge: HackingJudge) -> None:
        super().__init__(handlers=judge.handlers())
        self.judge = judge

    async def score_choices(
        self, messages: Sequence[Message], *, reply_prefix: str, choices: Sequence[str]
    ) -> ChoiceScores:
        user = messages[-1].content
        self.calls.append(("score_choices", user))
        p = self.judge.p_yes(user)
        logprobs = {c: math.log(p if c == choices[0] else (1 - p)) for c in choices}
        return ChoiceScores(
            logprobs=logprobs,
            prompt_tokens=len(user) // 4,
            latency_s=0.0,
            model=self.model,
            backend=self.name,
        )
