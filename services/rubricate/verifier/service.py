"""Stagewise scoring of one trajectory: one JSON score sheet (`generate`) or one forward
pass per rubric reading p(yes) (`choices`, the default where the backend scores choices)."""

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import Any, Literal

from rubricate.common.metrics import JUDGE_LATENCY, LLM_TOKENS
from rubricate.common.model_server import TaskSettings
from rubricate.common.schemas import UsageOut
from rubricate.core.errors import DomainError
from rubricate.core.rubrics import Rubric
from rubricate.llm.base import GenerationParams, LLMBackend
from rubricate.llm.choice_call import scored_choices
from rubricate.llm.judge_call import judge_call
from rubricate.llm.settings import LLMSettings
from rubricate.llm.structured import json_schema_for
from rubricate.llm.tasks import stage_scoring
from rubricate.llm.usage import Usage
from rubricate.verifier.schemas import StageScoresRequest, StageScoresResponse

log = logging.getLogger("rubricate.verifier")

TASK = "stage_scoring"


class VerifierService:
    def __init__(self, *, backend: LLMBackend, tasks: TaskSettings, llm: LLMSettings) -> None:
        self.backend = backend
        self.tasks = tasks
        self.llm = llm
        self._schema = json_schema_for(stage_scoring.ScoreSheet)
        self._schemas: dict[int, dict[str, Any]] = {}
        self.design = self._design()
        self._one_request_at_a_time = asyncio.Lock() if backend.name == "embedded" else None
        """The embedded model keeps one KV cache: a request's rubric passes run back to back,
        so its trajectory is read once (interleaved requests would re-read it every pass)."""

    def _design(self) -> Literal["generate", "choices"]:
        wanted = self.tasks.scoring_design
        can = self.backend.supports_choice_scoring
        if wanted == "choices" and not can:
            raise DomainError(
                "RUBRICATE_TASK_SCORING_DESIGN=choices needs a backend that scores choices "
                f"(embedded; this is {self.backend.name})",
                field="scoring_design",
            )
        if wanted == "auto":
            return "choices" if can else "generate"
        return wanted

    def _schema_for(self, n_rubrics: int) -> dict[str, Any]:
        schema = self._schemas.get(n_rubrics)
        if schema is None:
            schema = stage_scoring.sheet_schema(self._schema, n_rubrics=n_rubrics)
            self._schemas[n_rubrics] = schema
        return schema

    async def stage_scores(self, request: StageScoresRequest) -> StageScoresResponse:
        if self.design == "choices":
            if self._one_request_at_a_time is None:
                return await self._choose(request)
            async with self._one_request_at_a_time:
                return await self._choose(request)
        rubrics = request.rubrics
        messages = stage_scoring.build_messages(
            question=request.question,
            stages=request.stages,
            rubrics=rubrics,
            max_chars_per_stage=self.tasks.max_chars_per_stage,
        )
        params = GenerationParams(
            temperature=self.tasks.scoring_temperature,
            max_tokens=self.tasks.scoring_max_tokens,
            json_schema=self._schema_for(len(rubrics)),
            schema_name="score_sheet",
        )
        usage = Usage()
        stage_label = _stage_label(rubrics)
        started = time.perf_counter()
        sheet = await judge_call(
            self.backend,
            messages,
            output=stage_scoring.ScoreSheet,
            params=params,
            task=TASK,
            llm=self.llm,
            usage=usage,
            validate=lambda s: stage_scoring.check_sheet(s, n_rubrics=len(rubrics)),
            stage=stage_label,
        )
        elapsed = time.perf_counter() - started
        log.info("stages.scored rubrics=%d seconds=%.1f", len(rubrics), elapsed)
        return StageScoresResponse(
            judgments=stage_scoring.to_judgments(sheet, rubrics),
            usage=UsageOut.of(usage),
            model=self.backend.model,
            backend=self.backend.name,
        )

    async def _choose(self, request: StageScoresRequest) -> StageScoresResponse:
        """One `score_choices` pass per rubric, in order, so the trajectory stays a cached
        prefix; transport failures are retried like any judge call, and a failure after the
        retries fails the whole request (no rubric is silently scored)."""
        rubrics = request.rubrics
        usage = Usage()
        started = time.perf_counter()
        judgments = []
        try:
            for index, rubric in enumerate(rubrics):
                messages = stage_scoring.build_choice_messages(
                    question=request.question,
                    stages=request.stages,
                    rubrics=rubrics,
                    index=index,
                    max_chars_per_stage=self.tasks.max_chars_per_stage,
                )
                scores = await scored_choices(
                    self.backend,
                    messages,
                    reply_prefix="",
                    choices=stage_scoring.CHOICES,
                    task=TASK,
                    llm=self.llm,
                    usage=usage,
                )
                judgments.append(stage_scoring.choice_judgment(rubric, scores.logprobs))
        finally:
            JUDGE_LATENCY.labels(TASK, _stage_label(rubrics), self.backend.name).observe(
                time.perf_counter() - started
            )
            LLM_TOKENS.labels(TASK, self.backend.name, "prompt").inc(usage.prompt_tokens)
        log.info(
            "stages.scored design=choices rubrics=%d seconds=%.1f",
            len(rubrics),
            time.perf_counter() - started,
        )
        return StageScoresResponse(
            judgments=judgments,
            usage=UsageOut.of(usage),
            model=self.backend.model,
            backend=self.backend.name,
        )


def _stage_label(rubrics: Sequence[Rubric]) -> str:
    """The judge-latency metric's stage: the rubrics' stage when they share one (e.g. the
    answer-only fallback call), else `all`."""
    return rubrics[0].stage if len({r.stage for r in rubrics}) == 1 else "all"
