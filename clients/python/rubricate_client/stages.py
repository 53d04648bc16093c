"""Stage parsing of Plan/Research/Review/Answer trajectories (RubricEM App. C.3), on the
client, so a trainer adapter can find each stage's tokens without asking the server.

The platform's stage parser (`rubricate.stagewise.domain.stages`) uses this one:

- Plan: start of text through the end of the first ``</structured_plan>``.
- Research: after the plan through the tool-call loops, up to the review (or the answer).
- Review: the last ``<think>`` before ``<review>`` through ``</review>``.
- Answer: ``<answer>`` through the end of the text.

Spans are ``[start, end)`` character offsets; a stage whose markers are absent is None.
Research counts only when its region holds a tool call or a state evaluation.
"""

import re

from rubricate_client.constants import Stage

PLAN_END = "</structured_plan>"
REVIEW_OPEN = "<review>"
REVIEW_CLOSE = "</review>"
ANSWER_OPEN = "<answer>"
THINK_OPEN = "<think>"
RESEARCH_MARKERS = re.compile(
    r"<(call_tool|tool_call|tool_output|tool_response|state_evaluation|search)\b"
)

Span = tuple[int, int]


def stage_spans(trajectory: str) -> dict[Stage, Span | None]:
    n = len(trajectory)

    plan: Span | None = None
    plan_close = trajectory.find(PLAN_END)
    if plan_close >= 0:
        plan = (0, plan_close + len(PLAN_END))
    after_plan = plan[1] if plan else 0

    answer: Span | None = None
    answer_open = trajectory.rfind(ANSWER_OPEN)
    if answer_open >= after_plan:
        answer = (answer_open, n)
    before_answer = answer[0] if answer else n

    review: Span | None = None
    review_open = trajectory.rfind(REVIEW_OPEN, after_plan, before_answer)
    if review_open >= 0:
        review_close = trajectory.find(REVIEW_CLOSE, review_open, before_answer)
        if review_close >= 0:
            think = trajectory.rfind(THINK_OPEN, after_plan, review_open)
            start = think if think >= 0 else review_open
            review = (start, review_close + len(REVIEW_CLOSE))

    research: Span | None = None
    research_end = review[0] if review else before_answer
    if RESEARCH_MARKERS.search(trajectory, after_plan, research_end):
        if plan is None:
            first = RESEARCH_MARKERS.search(trajectory, 0, research_end)
            assert first is not None
            research = (first.start(), research_end)
        else:
            research = (after_plan, research_end)

    return {"plan": plan, "research": research, "review": review, "answer": answer}
