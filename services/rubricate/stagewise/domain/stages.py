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

from dataclasses import dataclass

from rubricate_client.constants import STAGES
from rubricate_client.schemas.rubrics import Stage
from rubricate_client.stages import Span, stage_spans


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
    """One parser with the client's (`rubricate_client.stages`, the trainer adapters')."""
    return StageSpans(spans=stage_spans(trajectory))
