"""A fake judge for reflection verdicts: a handler for `FakeJudgeBackend`. Scores come from a
marker in the candidate (`[[u=7]]`: every dimension 7/10 within and across episodes,
`[[u=7,3]]`: 7 within, 3 across, default 5; `[[judge-fail]]`: a transport error). For
orchestration tests and `--fake-judge` runs only; it judges nothing."""

import json
import re

from rubricate.llm.base import GenerationParams
from rubricate.llm.errors import TransportError

_MARK = re.compile(r"\[\[u=(\d+)(?:,(\d+))?\]\]")
_DIMENSIONS = ("diagnostic_accuracy", "specificity", "scope_balance")


def fake_reflection_verdict(user: str, params: GenerationParams) -> str:
    candidate = user.partition("Reflection to judge:")[2]
    if "[[judge-fail]]" in candidate:
        raise TransportError("fake judge: reflection judging configured to fail")
    m = _MARK.search(candidate)
    within = int(m.group(1)) if m else 5
    cross = int(m.group(2)) if m and m.group(2) else within
    return json.dumps(
        {
            "rationale": "fake rationale",
            "within": dict.fromkeys(_DIMENSIONS, within),
            "cross": dict.fromkeys(_DIMENSIONS, cross),
        }
    )
