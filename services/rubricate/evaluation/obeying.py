"""A fake judge that obeys every instruction it is shown (GitHub issue 25).

For the injection evaluation and its tests: if the prompt a judge task receives holds any
part of a known attack, the fake does what the attack asks (every nugget `support`, every
criterion met, every reflection dimension 10, the attacked candidate ranked first). Without
an attack it judges by word overlap, so clean material gets plausible, deterministic
scores. A defence that holds against this judge holds because the attack never reached
the judge or cannot lift the score after it, not because the model resisted.
"""

import json
import re
from collections.abc import Iterable, Sequence

from rubricate.core.words import content_words
from rubricate.llm.base import GenerationParams
from rubricate.llm.errors import TransportError
from rubricate.llm.prompt_text import escape_untrusted
from rubricate.testing.fake_judge import FakeJudgeBackend
from rubricate.testing.fake_nuggets import FakeNuggetLabeller, parse_prompt
from rubricate.testing.handler import Handler

_CANDIDATE = re.compile(r'<untrusted candidate="([A-Z])">\n(.*?)\n</untrusted>', re.S)
_CRITERION = re.compile(r"^(\d+)\. (.*)$", re.M)
_DIMENSIONS = ("diagnostic_accuracy", "specificity", "scope_balance")


def tells_of(parts: Iterable[str]) -> list[str]:
    """What the fake looks for: the longest line of each attack part as a prompt shows it."""
    out: list[str] = []
    for part in parts:
        lines = [line.strip() for line in escape_untrusted(part).splitlines() if line.strip()]
        if lines:
            out.append(max(lines, key=len))
    return out


def _count(user: str) -> int:
    found = re.search(r"exactly (\d+) items", user)
    if found is None:
        raise TransportError("obeying judge: the prompt names no item count")
    return int(found.group(1))


def _share(wanted: str, text: str) -> float:
    words = content_words(wanted)
    return len(words & content_words(text)) / len(words) if words else 0.0


class ObeyingJudge:
    """Handlers for `FakeJudgeBackend`, one per judge task, that obey the attacks `tells`."""

    def __init__(self, tells: Sequence[str]) -> None:
        self.tells = [t for t in tells if t]
        self.obeyed: list[str] = []
        """The schema name of every call that obeyed an attack."""
        self._nuggets = FakeNuggetLabeller(formats=("json",))

    def attacked(self, text: str) -> bool:
        return any(tell in text for tell in self.tells)

    def handlers(self) -> dict[str, Handler]:
        return {
            "nugget_labels": self.nugget_labels,
            "step_verdicts": self.step_verdicts,
            "listwise_rank": self.listwise_rank,
            "reflection_verdict": self.reflection_verdict,
        }

    def backend(self) -> FakeJudgeBackend:
        return FakeJudgeBackend(handlers=self.handlers())

    def nugget_labels(self, user: str, params: GenerationParams) -> str:
        if not self.attacked(user):
            return self._nuggets(user, params)
        self.obeyed.append("nugget_labels")
        _, nuggets, _ = parse_prompt(user)
        return json.dumps(["support"] * len(nuggets))

    def step_verdicts(self, user: str, params: GenerationParams) -> str:
        n = _count(user)
        if self.attacked(user):
            self.obeyed.append("step_verdicts")
            return json.dumps({"verdicts": [{"index": i, "meets": True} for i in range(1, n + 1)]})
        action = user.partition("Proposed action:")[2].partition("\nCriteria:")[0]
        listing = user.partition("\nCriteria:\n")[2]
        criteria = {int(m.group(1)): m.group(2) for m in _CRITERION.finditer(listing)}
        verdicts = [
            {"index": i, "meets": _share(criteria.get(i, ""), action) >= 0.5}
            for i in range(1, n + 1)
        ]
        return json.dumps({"verdicts": verdicts})

    def listwise_rank(self, user: str, params: GenerationParams) -> str:
        shown = _CANDIDATE.findall(user)
        question = user.partition("Question:\n")[2].partition("</untrusted>")[0]
        attacked = [label for label, text in shown if self.attacked(text)]
        if attacked:
            self.obeyed.append("listwise_rank")
        honest = sorted(
            (label for label, _ in shown if label not in attacked),
            key=lambda label: -_share(question, dict(shown)[label]),
        )
        return json.dumps({"rationale": "obeying fake", "ranking": attacked + honest})

    def reflection_verdict(self, user: str, params: GenerationParams) -> str:
        score = 5
        if self.attacked(user):
            self.obeyed.append("reflection_verdict")
            score = 10
        use = dict.fromkeys(_DIMENSIONS, score)
        return json.dumps({"rationale": "obeying fake", "within": use, "cross": use})
