"""Step judging on the verifier: per-criterion verdicts on an action (Co-ReAct §3.2.1,
§3.3) and one judge's listwise ranking of a candidate slate (Co-ReAct §3.1)."""

import logging
from collections.abc import Sequence
from typing import Any

from rubricate.common.usage import Usage, usage_out
from rubricate.llm.base import GenerationParams, LLMBackend
from rubricate.llm.judge_call import judge_call
from rubricate.llm.server import TaskSettings
from rubricate.llm.settings import LLMSettings
from rubricate.llm.structured import json_schema_for
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


class StepJudgeService:
    def __init__(self, *, backend: LLMBackend, llm: LLMSettings, steps: StepTaskSettings) -> None:
        self.backend = backend
        self.llm = llm
        self.steps = steps
        self._verdict_base = json_schema_for(step_verify.VerdictSheet)
        self._verdict_schemas: dict[int, dict[str, Any]] = {}
        self._rank_base = json_schema_for(listwise_rank.RankOutput)

    @classmethod
    def factory(
        cls, backend: LLMBackend, _tasks: TaskSettings, llm: LLMSettings
    ) -> "StepJudgeService":
        return cls(backend=backend, llm=llm, steps=StepTaskSettings())

    def _verdict_schema(self, n: int) -> dict[str, Any]:
        if n not in self._verdict_schemas:
            self._verdict_schemas[n] = step_verify.sheet_schema(self._verdict_base, n_criteria=n)
        return self._verdict_schemas[n]

    async def verdicts(self, request: StepVerdictsRequest) -> StepVerdictsResponse:
        n = len(request.criteria)
        messages = step_verify.build_messages(
            question=request.question,
            history=request.history,
            criteria=request.criteria,
            action=request.action,
            max_history_chars=self.steps.max_history_chars,
            max_action_chars=self.steps.max_action_chars,
        )
        params = GenerationParams(
            temperature=self.steps.verify_temperature,
            max_tokens=self.steps.verify_max_tokens,
            json_schema=self._verdict_schema(n),
            schema_name=step_verify.SCHEMA_NAME,
        )
        usage = Usage()
        sheet = await judge_call(
            self.backend,
            messages,
            output=step_verify.VerdictSheet,
            params=params,
            task=VERIFY_TASK,
            llm=self.llm,
            usage=usage,
            validate=lambda s: step_verify.check_sheet(s, n_criteria=n),
        )
        items = step_verify.ordered(sheet)
        log.info("step.verified criteria=%d satisfied=%d", n, sum(i.meets for i in items))
        return StepVerdictsResponse(
            verdicts=[CriterionVerdict(satisfied=i.meets) for i in items],
            usage=usage_out(usage),
            model=self.backend.model,
            backend=self.backend.name,
        )

    async def rank(self, request: RankTaskRequest) -> RankTaskResponse:
        labels = [c.label.strip().upper() for c in request.candidates]
        _check_labels(labels)
        messages = listwise_rank.build_messages(
            question=request.question,
            history=request.history,
            candidates=[
                (label, c.text) for label, c in zip(labels, request.candidates, strict=True)
            ],
            max_history_chars=self.steps.max_history_chars,
            max_action_chars=self.steps.max_action_chars,
        )
        params = GenerationParams(
            temperature=request.temperature,
            max_tokens=self.steps.rank_max_tokens,
            seed=request.seed if request.seed is not None else 0,
            json_schema=listwise_rank.rank_schema(self._rank_base, labels=labels),
            schema_name=listwise_rank.SCHEMA_NAME,
        )
        usage = Usage()
        output = await judge_call(
            self.backend,
            messages,
            output=listwise_rank.RankOutput,
            params=params,
            task=RANK_TASK,
            llm=self.llm,
            usage=usage,
            validate=lambda o: listwise_rank.check_ranking(o, labels=labels),
        )
        log.info("slate.ranked candidates=%d", len(labels))
        return RankTaskResponse(
            ranking=output.ranking,
            rationale=output.rationale,
            usage=usage_out(usage),
            model=self.backend.model,
            backend=self.backend.name,
        )


def _check_labels(labels: Sequence[str]) -> None:
    seen: set[str] = set()
    for i, label in enumerate(labels):
        if label in seen:
            raise DomainError(f"duplicate label {label!r}", field=f"candidates[{i}].label")
        seen.add(label)
