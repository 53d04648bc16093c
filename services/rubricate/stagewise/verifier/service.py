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

import logging
import time
from collections.abc import Sequence
from functools import cache
from typing import Any, Final, Literal

from rubricate.common.usage import Usage
from rubricate.core.assertions import UnitReading, ungrounded
from rubricate.llm.base import LLMBackend
from rubricate.llm.calls import gather_or_cancel, judge_metrics, scored_choices
from rubricate.llm.errors import LLMError
from rubricate.llm.prompt_text import manipulation_markers
from rubricate.llm.request_gate import RequestGate
from rubricate.llm.server import TaskSettings, as_service_error
from rubricate.llm.settings import LLMSettings
from rubricate.llm.structured import json_schema_for
from rubricate.llm.task_service import TaskService
from rubricate.stagewise.prompts import scoring as stage_scoring
from rubricate.stagewise.verifier.schemas import (
    GroupStageScoresRequest,
    GroupStageScoresResponse,
    StageScoresRequest,
    StageScoresResponse,
    TrajectoryScores,
)
from rubricate_client.errors import DomainError
from rubricate_client.schemas.errors import ErrorBody
from rubricate_client.schemas.rubrics import Judgment, Rubric

log = logging.getLogger("rubricate.verifier")

TASK = "stage_scoring"  # the judge metrics' task label, and `STAGE_SCORES.name`

_SHEET = json_schema_for(stage_scoring.ScoreSheet)


@cache
def _sheet_schema(n_rubrics: int, n_units: int) -> dict[str, Any]:
    """The score sheet's schema for exactly `n_rubrics` items citing the answer's `n_units`
    units (built once per pair)."""
    return stage_scoring.sheet_schema(_SHEET, n_rubrics=n_rubrics, n_units=n_units)


class _Unread:
    """`stage_scores`' default: the answer is not read yet (it reads it itself)."""


UNREAD: Final = _Unread()
AnswerReading = UnitReading | _Unread | None
"""An answer read before scoring (`StageScoringService.read_answers`): its units, None where
none is read, `UNREAD` where `stage_scores` is to read it itself."""


class StageScoringService(TaskService):
    """The verifier's stage scores task (`stagewise.verifier.endpoints.STAGE_SCORES`, and
    `GROUP_STAGE_SCORES` for a group's trajectories in one call)."""

    def __init__(self, *, backend: LLMBackend, tasks: TaskSettings, llm: LLMSettings) -> None:
        super().__init__(backend=backend, tasks=tasks, llm=llm)
        self.design = chosen_design(self.tasks.scoring_design, backend, llm)
        self.gate = RequestGate(llm, backend.name)

    async def stage_scores(
        self, request: StageScoresRequest, *, read: AnswerReading = UNREAD
    ) -> StageScoresResponse:
        """The request's rubrics judged on its trajectory. The answer stage is read as
        assertion units first (`llm.assertions`): the judge sees it as units, a met answer
        rubric needs evidence (`generate`), and an answer that asserts nothing gets the floor
        on its answer rubrics with no judge call, as does a positive answer rubric whose numbers
        or names none of its assertions holds (`core.assertions.ungrounded`)."""
        usage = Usage()
        answer_units = (
            await self._answer_units(request, usage) if isinstance(read, _Unread) else read
        )
        # a stage withheld for addressing the grader meets no positive rubric and fully shows
        # every negative one, as its prompt notice says: decided here, not asked of a judge
        # (whose p(yes) for a withheld stage is small but not 0)
        withheld = {
            stage
            for stage, text in request.stages.items()
            if text is not None and manipulation_markers(text)
        }
        expected = self.design == "choices"  # its judgments all carry an expected score
        floored: dict[str, Judgment] = {
            r.id: stage_scoring.floor_judgment(r, stage_scoring.WITHHELD, expected=expected)
            for r in request.rubrics
            if r.stage in withheld
        }
        rubrics = [r for r in request.rubrics if r.id not in floored]
        if answer_units is not None and not answer_units.has_assertion:
            floored |= {
                r.id: stage_scoring.floor_judgment(r, stage_scoring.NO_ASSERTION, expected=expected)
                for r in rubrics
                if r.stage == "answer"
            }
            rubrics = [r for r in rubrics if r.id not in floored]
        elif answer_units is not None:
            # a positive answer rubric whose numbers or names no assertion holds cannot be
            # met: not met, with no judge call (`core.assertions.ungrounded`)
            for r in rubrics:
                if r.stage == "answer" and r.polarity == "positive":
                    why = ungrounded(r.description, answer_units)
                    if why:
                        floored[r.id] = stage_scoring.floor_judgment(r, why, expected=expected)
            rubrics = [r for r in rubrics if r.id not in floored]
        judged: list[Judgment] = []
        if rubrics:
            if self.design == "choices":
                async with self.gate.request():
                    judged = await self._choose(request, rubrics, answer_units, usage)
            else:
                judged = await self._sheet(request, rubrics, answer_units, usage)
        by_id = {j.rubric_id: j for j in judged} | floored
        return StageScoresResponse(
            judgments=[by_id[r.id] for r in request.rubrics], **self.served(usage)
        )

    def _answer_to_read(self, request: StageScoresRequest) -> str | None:
        """The answer stage, when it is read as units: an answer rubric judges it, the
        reading is on and the stage is not withheld whole by the judge-addressing markers
        (the second line)."""
        answer = request.stages.get("answer")
        if (
            not self.units.on
            or answer is None
            or not any(r.stage == "answer" for r in request.rubrics)
            or manipulation_markers(answer)
        ):
            return None
        return answer

    async def _answer_units(self, request: StageScoresRequest, usage: Usage) -> UnitReading | None:
        """The answer stage as units (`_answer_to_read`), else None."""
        answer = self._answer_to_read(request)
        if answer is None:
            return None
        return await self.units.read(answer, question=request.question, usage=usage)

    async def read_answers(
        self, requests: Sequence[StageScoresRequest], usage: Usage | None = None
    ) -> list[AnswerReading]:
        """The answers of a group's trajectories read in one pass, for `stage_scores(read=)`
        (`group_stage_scores`, and the audit's reference judge, which reads a group as the live
        one does); when that pass fails, each trajectory reads its own. The pass's usage,
        failed or not, counts in `usage`."""
        usage = Usage() if usage is None else usage
        try:
            return await self._group_answer_units(requests, usage)
        except LLMError as exc:  # no answer could be read: each trajectory reads its own
            usage.merge(exc.usage)
            return [UNREAD] * len(requests)

    async def _group_answer_units(
        self, requests: Sequence[StageScoresRequest], usage: Usage
    ) -> list[AnswerReading]:
        """The answers of a group's trajectories read in one pass (`UnitReader.read_many`:
        one model call for the group, not one per trajectory); None where none is read."""
        answers = [self._answer_to_read(r) for r in requests]
        wanted = [k for k, answer in enumerate(answers) if answer is not None]
        out: list[AnswerReading] = [None] * len(requests)
        if wanted:
            texts = [answers[k] or "" for k in wanted]
            read = await self.units.read_many(texts, question=requests[0].question, usage=usage)
            for k, reading in zip(wanted, read, strict=True):
                out[k] = reading
        return out

    async def _sheet(
        self,
        request: StageScoresRequest,
        rubrics: list[Rubric],
        answer_units: UnitReading | None,
        usage: Usage,
    ) -> list[Judgment]:
        """One JSON score sheet for `rubrics` (the `generate` design)."""
        messages = stage_scoring.build_messages(
            question=request.question,
            stages=request.stages,
            rubrics=rubrics,
            max_chars_per_stage=self.tasks.max_chars_per_stage,
            answer_units=answer_units,
        )
        n_units = 0 if answer_units is None else len(answer_units.units)
        params = self.decoding(
            "scoring", "score_sheet", json_schema=_sheet_schema(len(rubrics), n_units)
        )
        started = time.perf_counter()
        sheet = await self.structured(
            TASK,
            messages,
            stage_scoring.ScoreSheet,
            params,
            usage,
            validate=lambda s: stage_scoring.check_sheet(s, n_rubrics=len(rubrics)),
            stage=_stage_label(rubrics),
        )
        elapsed = time.perf_counter() - started
        log.info("stages.scored rubrics=%d seconds=%.1f", len(rubrics), elapsed)
        return stage_scoring.to_judgments(sheet, rubrics, answer_units=answer_units)

    async def group_stage_scores(
        self, request: GroupStageScoresRequest
    ) -> GroupStageScoresResponse:
        """Every trajectory scored as `stage_scores` scores it alone, all at once (the judge
        limiter bounds the calls in flight); a model failure is that trajectory's outcome,
        in the error shape and with the status its own call would have answered, and its
        usage counts in the call's."""
        usage = Usage()
        alone = [
            StageScoresRequest.model_construct(
                question=request.question,
                stages=t.stages,
                rubrics=[request.rubrics[k] for k in t.rubrics],
            )
            for t in request.trajectories
        ]
        readings = await self.read_answers(alone, usage)

        async def one(k: int) -> TrajectoryScores:
            try:
                out = await self.stage_scores(alone[k], read=readings[k])
            except LLMError as exc:
                usage.merge(exc.usage)
                failure = as_service_error(exc, task=TASK)
                return TrajectoryScores(
                    status=failure.status_code,
                    error=ErrorBody(
                        type=failure.type, message=failure.message, usage=failure.usage
                    ),
                )
            usage.merge(out.usage)
            return TrajectoryScores(judgments=out.judgments)

        outcomes = await gather_or_cancel(one(k) for k in range(len(alone)))
        return GroupStageScoresResponse(trajectories=outcomes, **self.served(usage))

    async def _choose(
        self,
        request: StageScoresRequest,
        rubrics: list[Rubric],
        answer_units: UnitReading | None,
        usage: Usage,
    ) -> list[Judgment]:
        """One `score_choices` pass per rubric. The first runs alone and puts the trajectory
        in the backend's prefix cache; the others follow (back to back where the gate says
        so, else at once). Transport failures are retried like any judge
        call; a failure after the retries, or the request's deadline, fails the whole
        request (no rubric is silently scored)."""
        started = time.perf_counter()

        prompts = stage_scoring.build_choice_prompts(
            question=request.question,
            stages=request.stages,
            rubrics=rubrics,
            max_chars_per_stage=self.tasks.max_chars_per_stage,
            answer_units=answer_units,
        )

        async def judge(index: int) -> Judgment:
            scores = await scored_choices(
                self.backend,
                prompts[index],
                reply_prefix="",
                choices=stage_scoring.CHOICES,
                task=TASK,
                usage=usage,
                **self.retry,
            )
            return stage_scoring.choice_judgment(rubrics[index], scores.logprobs)

        stage = _stage_label(rubrics)
        with judge_metrics(TASK, stage, self.backend.name, usage, completion_tokens=False):
            judgments = [await judge(0)]
            if self.gate.passes_back_to_back:
                for index in range(1, len(rubrics)):
                    judgments.append(await judge(index))
            else:
                judgments += await gather_or_cancel(judge(i) for i in range(1, len(rubrics)))
        log.info(
            "stages.scored design=choices rubrics=%d seconds=%.1f",
            len(rubrics),
            time.perf_counter() - started,
        )
        return judgments


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


def _stage_label(rubrics: Sequence[Rubric]) -> str:
    """The judge-latency metric's stage: the rubrics' stage when they share one (e.g. the
    answer-only fallback call), else `all`."""
    return rubrics[0].stage if len({r.stage for r in rubrics}) == 1 else "all"
