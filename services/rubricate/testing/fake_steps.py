"""A fake judge for the step tasks: handlers for `FakeJudgeBackend`, answered from markers in
the prompt. For orchestration tests and `--fake-judge` runs only; it judges nothing.

- step_rubric: k criteria "fake criterion i", weights 3, 2, 1, 1, …
- step_verdicts: criterion i is satisfied when the action holds `[[ci]]` (or `[[all]]`);
  `[[fail]]` in the criteria or the action is a transport error;
- listwise_rank: candidates ordered by their `[[q=N]]` marker, highest first.
"""

import json
import re

from rubricate.llm.base import GenerationParams
from rubricate.llm.errors import TransportError

_CANDIDATE = re.compile(r'<untrusted candidate="([A-Z])">\n(.*?)\n</untrusted>', re.S)
_QUALITY = re.compile(r"\[\[q=(\d+)\]\]")


def _count(user: str) -> int:
    found = re.search(r"exactly (\d+) items", user)
    if found is None:
        raise TransportError("fake judge: the prompt names no item count")
    return int(found.group(1))


def fake_step_rubric(user: str, params: GenerationParams) -> str:
    k = _count(user)
    weights = [3, 2] + [1] * max(0, k - 2)
    criteria = [
        {"criterion": f"fake criterion {i}", "weight": weights[i - 1]} for i in range(1, k + 1)
    ]
    return json.dumps({"criteria": criteria})


def fake_step_verdicts(user: str, params: GenerationParams) -> str:
    checked = user.partition("Proposed action:")[2]  # the action, then the criteria
    if "[[fail]]" in checked:
        raise TransportError("fake judge: verification configured to fail")
    action = checked.partition("\nCriteria:")[0]
    verdicts = [
        {"index": i, "meets": f"[[c{i}]]" in action or "[[all]]" in action}
        for i in range(1, _count(user) + 1)
    ]
    return json.dumps({"verdicts": verdicts})


def fake_listwise_rank(user: str, params: GenerationParams) -> str:
    def quality(text: str) -> int:
        found = _QUALITY.search(text)
        return int(found.group(1)) if found else 0

    shown = _CANDIDATE.findall(user)
    ranking = [label for label, text in sorted(shown, key=lambda p: -quality(p[1]))]
    return json.dumps({"rationale": "fake: by marked quality", "ranking": ranking})
