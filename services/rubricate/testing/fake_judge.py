"""FakeJudgeBackend: a fake LLM that answers the stagewise judge tasks instantly.

For unit-testing orchestration and for measuring the gateway's own overhead only; it judges
nothing. Scores come from markers in the trajectory text:
- `[[excellent]]` → every rubric of that trajectory scores 2, `[[poor]]` → 0, otherwise 1;
- `[[fail-stagewise]]` → a scoring call that includes non-answer rubrics raises a transport
  error (the answer-only fallback call succeeds);
- `[[fail-all]]` → every scoring call for that trajectory raises a transport error;
- a score sheet cites, for its answer rubrics scored above 0, every answer unit shown as an
  assertion; the unit-reading task reads a unit holding `[[meta]]` as meta, any other as
  content.
Generation proposes one positive rubric per stage, numbered by call, unless `fail_generation`.
Failure modes for any task, keyed by the request's schema name (checked before everything
else): a task in `failing_tasks` raises a transport error (what an HTTP 500 from a model
server becomes), a task in `garbage_tasks` replies with text that is not JSON at all.
Other tasks are answered by `handlers`, keyed by the request's schema name: each takes the
user prompt and the generation parameters and returns the reply text (or raises). Every task
kind has a default, so `--fake-judge` runs get every kind of reward: nugget labels
(`FakeNuggetLabeller`: word overlap), the step tasks (`fake_steps`), reflection verdicts
(`fake_reflections`) and the six mining tasks (`fake_mining`); a handler passed in replaces
the default of its task.
"""

import asyncio
import json
import re
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from rubricate.llm.base import Completion, GenerationParams, LLMBackend, Message
from rubricate.llm.errors import TransportError
from rubricate.testing.fake_mining import fake_mining_handlers
from rubricate.testing.fake_nuggets import FakeNuggetLabeller
from rubricate.testing.fake_reflections import fake_reflection_verdict
from rubricate.testing.fake_steps import fake_listwise_rank, fake_step_rubric, fake_step_verdicts
from rubricate.testing.handler import Handler
from rubricate_client.constants import STAGES

GARBAGE = "I am sorry, I cannot help with that. <<not json>>"
"""The reply of a task in `garbage_tasks`: no JSON, no score, nothing to repair."""

_RUBRIC_LINE = re.compile(r"^(\d+)\. \((plan|research|review|answer)\)", re.M)
_SHOWN_UNIT = re.compile(r"^\[(u\d+)\] ", re.M)
_LISTED_UNIT = re.compile(r"^((?:\d+\.)?u\d+): <untrusted>(.*?)</untrusted>$", re.M)
META_TELL = "[[meta]]"
"""A unit holding it is read as talk about the text (the fake's answer to `unit_kinds`)."""


def shown_units(material: str) -> list[str]:
    """The ids of the answer units a scoring prompt shows as assertions (what a fake score
    sheet cites as evidence for a met answer rubric); empty when the answer is not read as
    units."""
    return _SHOWN_UNIT.findall(material)


def fake_unit_kinds(user: str, params: GenerationParams) -> str:
    """The unit-reading task: every listed unit is content unless it holds `META_TELL`."""
    meta = [uid for uid, text in _LISTED_UNIT.findall(user) if META_TELL in text]
    return json.dumps({"not_content": meta})


class FakeJudgeBackend(LLMBackend):
    name = "fake"

    def __init__(
        self,
        *,
        fail_generation: bool = False,
        rubrics_per_stage: int = 1,
        delay_s: float = 0.0,
        handlers: Mapping[str, Handler] | None = None,
        failing_tasks: Collection[str] = (),
        garbage_tasks: Collection[str] = (),
    ) -> None:
        self.model = "fake-judge"
        self.handlers: dict[str, Handler] = {
            "nugget_labels": FakeNuggetLabeller(),
            "unit_kinds": fake_unit_kinds,
            "step_rubric": fake_step_rubric,
            "step_verdicts": fake_step_verdicts,
            "listwise_rank": fake_listwise_rank,
            "reflection_verdict": fake_reflection_verdict,
            **fake_mining_handlers(),
        }
        self.handlers.update(handlers or {})
        self.fail_generation = fail_generation
        self.rubrics_per_stage = rubrics_per_stage
        self.delay_s = delay_s
        self.failing_tasks: set[str] = set(failing_tasks)
        self.garbage_tasks: set[str] = set(garbage_tasks)
        self.calls: list[tuple[str, str]] = []
        """(schema_name, user prompt) of every call, in order."""
        self._generation_calls = 0

    async def complete(self, messages: Sequence[Message], params: GenerationParams) -> Completion:
        user = messages[-1].content
        self.calls.append((params.schema_name, user))
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if params.schema_name in self.failing_tasks:
            raise TransportError(f"fake judge: task {params.schema_name!r} configured to fail")
        if params.schema_name in self.garbage_tasks:
            text = GARBAGE
        elif params.schema_name in self.handlers:
            text = self.handlers[params.schema_name](user, params)
        elif params.schema_name == "stage_rubrics":
            text = self._generate()
        elif params.schema_name == "score_sheet":
            text = self._score(user)
        else:
            raise TransportError(f"fake judge has no answer for task {params.schema_name!r}")
        return Completion(
            text=text,
            prompt_tokens=len(user) // 4,
            completion_tokens=len(text) // 4,
            latency_s=self.delay_s,
            model=self.model,
            backend=self.name,
            finish_reason="stop",
        )

    def _generate(self) -> str:
        if self.fail_generation:
            raise TransportError("fake judge: generation configured to fail")
        self._generation_calls += 1
        n = self._generation_calls
        out: dict[str, Any] = {}
        for stage in STAGES:
            out[stage] = {
                "positive_rubrics": [
                    {
                        "title": f"{stage} criterion {n}.{i}",
                        "description": f"The {stage} stage does its part well.",
                        "weight": 2,
                    }
                    for i in range(1, self.rubrics_per_stage + 1)
                ],
                "negative_rubrics": [],
            }
        return json.dumps(out)

    def _score(self, user: str) -> str:
        head, _, material = user.partition("\nTrajectory:")
        rubric_block = head.partition("Rubrics:")[2]
        numbered = _RUBRIC_LINE.findall(rubric_block)
        if "[[fail-all]]" in material:
            raise TransportError("fake judge: scoring configured to fail")
        if "[[fail-stagewise]]" in material and any(stage != "answer" for _, stage in numbered):
            raise TransportError("fake judge: stagewise scoring configured to fail")
        score = 2 if "[[excellent]]" in material else 0 if "[[poor]]" in material else 1
        shown = shown_units(material)
        items = [
            {
                "index": int(i),
                "justification": f"fake verdict for rubric {i}",
                "evidence": shown if stage == "answer" and score else [],
                "score": score,
            }
            for i, stage in numbered
        ]
        return json.dumps({"scores": items})
