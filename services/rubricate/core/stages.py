"""Stage parsing of Plan/Research/Review/Answer trajectories (RubricEM App. C.3).

- Plan: start of text through the end of the first ``</structured_plan>``.
- Research: after the plan through the tool-call loops, up to the review (or the answer).
- Review: the last ``<think>`` before ``<review>`` through ``</review>``.
- Answer: ``<answer>`` through the end of the text.

Spans are ``[start, end)`` character offsets. A stage whose markers are absent is
reported missing; nothing is guessed. Research counts as present only when its region
holds a tool call or a state evaluation, so free text between tags is not promoted to a
research stage.
"""

import re
from dataclasses import dataclass

from rubricate.core.constants import STAGES
from rubricate.core.rubrics import Stage

_PLAN_END = "</structured_plan>"
_REVIEW_OPEN = "<review>"
_REVIEW_CLOSE = "</review>"
_ANSWER_OPEN = "<answer>"
_THINK_OPEN = "<think>"
_RESEARCH_MARKERS = re.compile(
    r"<(call_tool|tool_call|tool_output|tool_response|state_evaluation|search)\b"
)

Span = tuple[int, int]


@dataclass(frozen=True)
class StageSpans:
    spans: dict[Stage, Span | None]

    @property
    def missing(self) -> list[Stage]:
        return [s for s in STAGES if self.spans[s] is None]

    def text(self, trajectory: str, stage: Stage) -> str | None:
        span = self.spans[stage]
        return None if span is None else trajectory[span[0] : span[1]]


def parse_stages(trajectory: str) -> StageSpans:
    n = len(trajectory)

    plan: Span | None = None
    plan_close = trajectory.find(_PLAN_END)
    if plan_close >= 0:
        plan = (0, plan_close + len(_PLAN_END))
    after_plan = plan[1] if plan else 0

    answer: Span | None = None
    answer_open = trajectory.rfind(_ANSWER_OPEN)
    if answer_open >= after_plan:
        answer = (answer_open, n)
    before_answer = answer[0] if answer else n

    review: Span | None = None
    review_open = trajectory.rfind(_REVIEW_OPEN, after_plan, before_answer)
    if review_open >= 0:
        review_close = trajectory.find(_REVIEW_CLOSE, review_open, before_answer)
        if review_close >= 0:
            think = trajectory.rfind(_THINK_OPEN, after_plan, review_open)
            start = think if think >= 0 else review_open
            review = (start, review_close + len(_REVIEW_CLOSE))

    research: Span | None = None
    research_end = review[0] if review else before_answer
    if _RESEARCH_MARKERS.search(trajectory, after_plan, research_end):
        if plan is None:
            first = _RESEARCH_MARKERS.search(trajectory, 0, research_end)
            assert first is not None
            research = (first.start(), research_end)
        else:
            research = (after_plan, research_end)

    return StageSpans(
        spans={"plan": plan, "research": research, "review": review, "answer": answer}
    )
