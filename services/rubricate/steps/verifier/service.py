"""Step judging on the verifier: per-criterion verdicts on an action (Co-ReAct §3.2.1,
§3.3) and one judge's listwise ranking of a candidate slate (Co-ReAct §3.1).

Text that addresses the judge (`llm.prompt_text.manipulation_markers`) never reaches it
(GitHub issue 25): an action that does meets no criterion, a criterion that does is met by
no action, and a candidate that does ranks last, all without a model call on that text; a
history that does is withheld from the prompt. Responses list what was found
(`judge_addressing`), so nothing is dropped silently."""

import logging
from collections.abc import Sequence
from functools import cache
from typing import Any, Unpack

from rubricate.common.usage import Usage
from rubricate.llm.assertions import shown_text
from rubricate.llm.base import GenerationParams
from rubricate.llm.prompt_text import addressing_by_part, manipulation_markers
from rubricate.llm.structured import json_schema_for
from rubricate.llm.task_service import TaskService, TaskServiceArgs
from rubricate.steps.prompts import ranking as listwise_rank
from rubricate.steps.prompts import verify as step_verify
from rubricate.steps.settings import StepTaskSettings
from rubricate.steps.verifier.schemas import (
    CriterionVerdict,
    RankTaskRequest,
    RankTaskResponse,
    StepVerdictsRequest,
    StepVerdictsResponse,
)
from rubricate_client.errors import DomainError

log = logging.getLogger("rubricate.verifier.steps")

VERIFY_TASK = "step_verify"
RANK_TASK = "listwise_rank"

_VERDICTS = json_schema_for(step_verify.VerdictSheet)
_RANK = json_schema_for(listwise_rank.RankOutput)


@cache
def _verdict_schema(n: int) -> dict[str, Any]:
    """The verdict sheet's schema for exactly `n` criteria (built once per count)."""
    return step_verify.sheet_schema(_VERDICTS, n_criteria=n)


class StepJudgeService(TaskService):
    """The verifier's step tasks (its settings: `steps.settings.StepTaskSettings`)."""

    def __init__(
        self, *, steps: StepTaskSettings | None = None, **common: Unpack[TaskServiceArgs]
    ) -> None:
        super().__init__(**common)
        self.steps = steps or StepTaskSettings()

    async def verdicts(self, request: StepVerdictsRequest) -> StepVerdictsResponse:
        found: list[str] = []
        action_markers = manipulation_markers(request.action)
        history_markers = manipulation_markers(request.history)
        criterion_markers = addressing_by_part(request.criteria)
        found += [f"action: {m}" for m in action_markers]
        found += [f"history: {m}" for m in history_markers]
        for n, markers in enumerate(criterion_markers, start=1):
            found += [f"criterion {n}: {m}" for m in markers]
        judged = [i for i, markers in enumerate(criterion_markers) if not markers]
        met = [False] * len(request.criteria)
        usage = Usage()
        action = None if action_markers or not judged else await self._shown_action(request, usage)
        if action_markers or not judged:
            log.warning("step.withheld markers=%s", "; ".join(found))
        elif action is None:
            log.info("step.no_content criteria=%d: the action holds no step", len(met))
        else:
            items = await self._judge_verdicts(
                request.model_copy(update={"action": action}),
                [request.criteria[i] for i in judged],
                history_markers,
                usage,
            )
            for i, item in zip(judged, items, strict=True):
                met[i] = item.meets
            log.info(
                "step.verified criteria=%d satisfied=%d withheld=%d",
                len(request.criteria),
                sum(met),
                len(request.criteria) - len(judged),
            )
        return StepVerdictsResponse(
            verdicts=[CriterionVerdict(satisfied=m) for m in met],
            judge_addressing=found,
            **self.served(usage),
        )

    async def _shown_action(self, request: StepVerdictsRequest, usage: Usage) -> str | None:
        """The action as the judge is shown it, read as units (`process`: talk about the
        text or its grading withheld); None when nothing of it is a step (a content-free
        "master key"): it then meets no criterion, with no judge call."""
        if not self.units.on:
            return request.action
        reading = await self.units.read(
            request.action, question=request.question, usage=usage, reading="process"
        )
        if not reading.has_assertion:
            return None
        whole = len(reading.asserted) == len(reading.units)
        return request.action if whole else shown_text(reading)

    async def _judge_verdicts(
        self,
        request: StepVerdictsRequest,
        criteria: Sequence[str],
        history_markers: Sequence[str],
        usage: Usage,
    ) -> list[step_verify.VerdictItem]:
        n = len(criteria)
        messages = step_verify.build_messages(
            question=request.question,
            history=request.history,
            criteria=criteria,
            action=request.action,
            max_history_chars=self.steps.max_history_chars,
            max_action_chars=self.steps.max_action_chars,
            history_markers=history_markers,
        )
        params = GenerationParams(
            temperature=self.steps.verify_temperature,
            max_tokens=self.steps.verify_max_tokens,
            json_schema=_verdict_schema(n),
            schema_name=step_verify.SCHEMA_NAME,
        )
        sheet = await self.structured(
            VERIFY_TASK,
            messages,
            step_verify.VerdictSheet,
            params,
            usage,
            validate=lambda s: step_verify.check_sheet(s, n_criteria=n),
        )
        return step_verify.ordered(sheet)

    async def rank(self, request: RankTaskRequest) -> RankTaskResponse:
        labels = [c.label.strip().upper() for c in request.candidates]
        _check_labels(labels)
        addressing = addressing_by_part([c.text for c in request.candidates])
        found = {
            label: markers for label, markers in zip(labels, addressing, strict=True) if markers
        }
        history_markers = manipulation_markers(request.history)
        if history_markers:
            found["history"] = history_markers
        clean = [
            (label, c.text)
            for label, c, markers in zip(labels, request.candidates, addressing, strict=True)
            if not markers
        ]
        last = [label for label, markers in zip(labels, addressing, strict=True) if markers]
        usage = Usage()
        if self.units.on and len(clean) > 1:  # a candidate holding no step ranks last, unread
            empty = [
                label
                for label, text in clean
                if not (
                    await self.units.read(
                        text, question=request.question, usage=usage, reading="process"
                    )
                ).has_assertion
            ]
            clean = [(label, text) for label, text in clean if label not in empty]
            last += empty
        if len(clean) < 2:
            # nothing to compare: the clean candidate (if any) first, the withheld ones after
            log.warning("slate.withheld candidates=%d", len(last))
            return RankTaskResponse(
                ranking=[label for label, _ in clean] + last,
                rationale="Candidates that address the grader or hold no step were withheld "
                "and ranked last: " + ", ".join(last),
                judge_addressing=found,
                **self.served(usage),
            )
        judged = [label for label, _ in clean]
        messages = listwise_rank.build_messages(
            question=request.question,
            history=request.history,
            candidates=clean,
            max_history_chars=self.steps.max_history_chars,
            max_action_chars=self.steps.max_action_chars,
            history_markers=history_markers,
        )
        params = GenerationParams(
            temperature=request.temperature,
            max_tokens=self.steps.rank_max_tokens,
            seed=request.seed if request.seed is not None else 0,
            json_schema=listwise_rank.rank_schema(_RANK, labels=judged),
            schema_name=listwise_rank.SCHEMA_NAME,
        )
        output = await self.structured(
            RANK_TASK,
            messages,
            listwise_rank.RankOutput,
            params,
            usage,
            validate=lambda o: listwise_rank.check_ranking(o, labels=judged),
        )
        log.info("slate.ranked candidates=%d withheld=%d", len(labels), len(last))
        rationale = output.rationale
        if last:
            rationale += f" (withheld and ranked last: {', '.join(last)})"
        return RankTaskResponse(
            ranking=output.ranking + last,
            rationale=rationale,
            judge_addressing=found,
            **self.served(usage),
        )


def _check_labels(labels: Sequence[str]) -> None:
    seen: set[str] = set()
    for i, label in enumerate(labels):
        if label in seen:
            raise DomainError(f"duplicate label {label!r}", field=f"candidates[{i}].label")
        seen.add(label)
