"""Stagewise scoring of one trajectory: one JSON score sheet (`generate`) or one forward
pass per rubric reading p(yes) (`choices`: the default on the embedded backend; on a served
backend that returns log-probabilities when chosen, docs/llm.md).

Every prompt of a group starts with the same bytes (instructions, question, the group's
rubrics) and every rubric pass of a trajectory with that trajectory's prompt
(`stagewise.prompts.scoring`), so prefix caches (llama.cpp's, vLLM's) serve them. In the
choices design the order of a trajectory's passes follows the server's cache
(`llm.request_gate`): with one shared cache the first pass runs alone, so it puts the
trajectory in the cache, and the other passes then go at once (up to the backend's
concurrency); with a cache per slot, or a backend that takes one call at a time, the passes
run back to back and only as many requests as there are slots run at once, so concurrent
requests do not evict each other's prefix.
"""

import asyncio
import logging
import time
from collections.abc import Awaitable, Iterable, Sequence
from typing import Any, Literal, TypeVar

from rubricate.common.metrics import JUDGE_LATENCY, LLM_TOKENS
from rubricate.common.usage import Usage, usage_out
from rubricate.llm.base import GenerationParams, LLMBackend
from rubricate.llm.choice_call import scored_choices
from rubricate.llm.judge_call import judge_call
from rubricate.llm.request_gate import RequestGate
from rubricate.llm.server import TaskSettings
from rubricate.llm.settings import LLMSettings
from rubricate.llm.structured import json_schema_for
from rubricate.stagewise.prompts import scoring as stage_scoring
from rubricate.stagewise.verifier.schemas import StageScoresRequest, StageScoresResponse
from rubricate_client.errors import DomainError
from rubricate_client.schemas.rubrics import Judgment, Rubric

log = logging.getLogger("rubricate.verifier")

T = TypeVar("T")

TASK = "stage_scoring"


class VerifierService:
    def __init__(self, *, backend: LLMBackend, tasks: TaskSettings, llm: LLMSettings) -> None:
        self.backend = backend
        self.tasks = tasks
        self.llm = llm
        self._schema = json_schema_for(stage_scoring.ScoreSheet)
        self._schemas: dict[int, dict[str, Any]] = {}
        self.design = self._design()
        self.gate = RequestGate(llm, backend.name)

    def _design(self) -> Literal["generate", "choices"]:
        return chosen_design(self.tasks.scoring_design, self.backend, self.llm)

    def _schema_for(self, n_rubrics: int) -> dict[str, Any]:
        schema = self._schemas.get(n_rubrics)
        if schema is None:
            schema = stage_scoring.sheet_schema(self._schema, n_rubrics=n_rubrics)
            self._schemas[n_rubrics] = schema
        return schema

    async def stage_scores(self, request: StageScoresRequest) -> StageScoresResponse:
        if self.design == "choices":
            async with self.gate.request():
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
            usage=usage_out(usage),
            model=self.backend.model,
            backend=self.backend.name,
        )

    async def _choose(self, request: StageScoresRequest) -> StageScoresResponse:
        """One `score_choices` pass per rubric. The first runs alone and puts the trajectory
        in the backend's prefix cache; the others follow (back to back where the gate says
        so, else at once). Transport failures are retried like any judge
        call; a failure after the retries, or the request's deadline, fails the whole
        request (no rubric is silently scored)."""
        rubrics = request.rubrics
        usage = Usage()
        started = time.perf_counter()

        async def judge(index: int) -> Judgment:
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
            return stage_scoring.choice_judgment(rubrics[index], scores.logprobs)

        try:
            judgments = [await judge(0)]
            if self.gate.passes_back_to_back:
                for index in range(1, len(rubrics)):
                    judgments.append(await judge(index))
            else:
                judgments += await gather_or_cancel(judge(i) for i in range(1, len(rubrics)))
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
            usage=usage_out(usage),
            model=self.backend.model,
            backend=self.backend.name,
        )


def chosen_design(
    wanted: Literal["auto", "generate", "choices"], backend: LLMBackend, llm: LLMSettings
) -> Literal["generate", "choices"]:
    """The scoring design `wanted` (RUBRICATE_TASK_SCORING_DESIGN) gives on this backend.
    `auto` is decided per backend by measurement (docs/llm.md, "Choosing the scoring
    design"): `choices` on the embedded backend and on a server with a prefix cache per slot
    (llama.cpp's `llama-server`), where it is the fastest design; `generate` elsewhere
    (llama-cpp-python's server, where it won; vLLM, not measured)."""
    can = backend.supports_choice_scoring
    if wanted == "choices" and not can:
        raise DomainError(
            "RUBRICATE_TASK_SCORING_DESIGN=choices needs a backend that scores choices "
            f"(embedded, or a server that returns log-probabilities; this {backend.name} "
            "backend does not)",
            field="scoring_design",
        )
    if wanted == "auto":
        measured_faster = backend.name == "embedded" or llm.prefix_cache == "per_slot"
        return "choices" if can and measured_faster else "generate"
    return wanted


async def gather_or_cancel(calls: Iterable[Awaitable[T]]) -> list[T]:
    """Await `calls` concurrently, in order; the first failure cancels the others."""
    tasks = [asyncio.ensure_future(call) for call in calls]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


def _stage_label(rubrics: Sequence[Rubric]) -> str:
    """The judge-latency metric's stage: the rubrics' stage when they share one (e.g. the
    answer-only fallback call), else `all`."""
    return rubrics[0].stage if len({r.stage for r in rubrics}) == 1 else "all"
