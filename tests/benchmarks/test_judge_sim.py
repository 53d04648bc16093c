"""The RL-step benchmark's judge simulator (`benchmarks/judge_sim.py`): what it models, not
how fast. The batch caps the calls in service, the rest queue, the fleet multiplies the
slots, a full queue answers 429 with Retry-After, and the same prompt gets the same answer
that the verifier's and the rubric generator's own parsers accept."""

import asyncio
import json
from typing import Any

import httpx
import pytest
from benchmarks.judge_sim import JudgeSim, SimConfig, answer, minimal_instance

from rubricate.llm.base import GenerationParams
from rubricate.llm.openai_compat import OpenAICompatBackend
from rubricate.llm.structured import json_schema_for
from rubricate.stagewise.prompts import rubric_generation, scoring
from rubricate_client.schemas.rubrics import Rubric

STAGES = {"plan": "plan {m}", "research": "search {m}", "review": "gaps {m}", "answer": "final {m}"}


def fast(**kwargs: Any) -> SimConfig:
    """Costs small enough that concurrent calls overlap without slowing the test."""
    return SimConfig(call_s=0.05, prefill_s=0.0, decode_s=0.0, **kwargs)


def body(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}], "max_tokens": 16}


async def test_the_batch_caps_the_calls_in_service_and_the_rest_queue() -> None:
    sim = JudgeSim(fast(max_batch=2))
    statuses = await asyncio.gather(*(sim.complete(body(f"q{i}")) for i in range(6)))
    stats = sim.snapshot()
    assert [s for s, _, _ in statuses] == [200] * 6
    assert stats["max_in_service"] == 2
    assert stats["max_queued"] >= 3
    assert stats["requests"] == 6 and stats["rejected"] == 0


async def test_a_fleet_multiplies_the_slots() -> None:
    sim = JudgeSim(fast(max_batch=2, fleet=3))
    await asyncio.gather(*(sim.complete(body(f"q{i}")) for i in range(6)))
    assert sim.snapshot()["max_in_service"] == 6
    assert sim.snapshot()["max_queued"] == 0


async def test_a_full_queue_answers_429_with_retry_after() -> None:
    sim = JudgeSim(fast(max_batch=1, max_queue=1, retry_after_s=2.0))
    results = await asyncio.gather(*(sim.complete(body(f"q{i}")) for i in range(4)))
    refused = [(status, retry) for status, _, retry in results if status == 429]
    assert len(refused) == 2 and all(retry == 2.0 for _, retry in refused)
    assert sim.snapshot()["rejected"] == 2


async def test_reset_zeroes_the_figures() -> None:
    sim = JudgeSim(fast())
    await sim.complete(body("q"))
    sim.reset()
    assert sim.snapshot()["requests"] == 0 and sim.snapshot()["slot_s"] == 0


def rubrics() -> list[Rubric]:
    out = []
    for n, stage in enumerate(("plan", "research", "review", "answer", "answer")):
        out.append(
            Rubric(
                id=f"r{n}",
                stage=stage,  # type: ignore[arg-type]
                title=f"criterion {n}",
                description=f"the {stage} does thing {n}",
                weight=1 + n % 3,
                polarity="negative" if n == 4 else "positive",
                origin="active",
            )
        )
    return out


def sheet_body(marker: str, order: list[Rubric]) -> dict[str, Any]:
    messages = scoring.build_messages(
        question="Why?",
        stages={k: v.format(m=marker) for k, v in STAGES.items()},  # type: ignore[misc]
        rubrics=order,
        max_chars_per_stage=2000,
    )
    schema = scoring.sheet_schema(json_schema_for(scoring.ScoreSheet), n_rubrics=len(order))
    return {
        "messages": [{"role": m.role, "content": m.content} for m in messages],
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "score_sheet", "schema": schema, "strict": True},
        },
    }


def test_a_score_sheet_is_deterministic_and_parses() -> None:
    first = answer(sheet_body("a", rubrics()))
    assert first.kind == "scoring"
    assert answer(sheet_body("a", rubrics())) == first
    sheet = scoring.ScoreSheet.model_validate_json(first.text)
    scoring.check_sheet(sheet, n_rubrics=5)
    # each verdict depends on the rubric and the trajectory, not on the rubric's number
    by_title = dict(zip([r.title for r in rubrics()], sheet.scores, strict=True))
    reversed_sheet = scoring.ScoreSheet.model_validate_json(
        answer(sheet_body("a", rubrics()[::-1])).text
    )
    again = dict(zip([r.title for r in rubrics()[::-1]], reversed_sheet.scores, strict=True))
    assert {t: s.score for t, s in by_title.items()} == {t: s.score for t, s in again.items()}
    others = [answer(sheet_body(m, rubrics())).text for m in "bcdefgh"]
    assert len(set(others)) > 1, "different trajectories should not all get one sheet"


def test_generated_rubrics_depend_on_the_question_and_the_set_of_trajectories() -> None:
    def generation(question: str, markers: str) -> dict[str, Any]:
        trajectories = [
            rubric_generation.GroupTrajectory(
                id=m,
                stages={k: v.format(m=m) for k, v in STAGES.items()},  # type: ignore[misc]
            )
            for m in markers
        ]
        messages = rubric_generation.build_messages(
            question=question, trajectories=trajectories, existing=[], max_chars_per_stage=2000
        )
        return {
            "messages": [{"role": m.role, "content": m.content} for m in messages],
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "stage_rubrics", "schema": {}, "strict": True},
            },
        }

    one = answer(generation("Why is the sky blue?", "abcd"))
    assert one.kind == "generation"
    assert answer(generation("Why is the sky blue?", "dcba")).text == one.text
    assert answer(generation("Why is the sky blue?", "abc")).text != one.text  # a partial group
    assert answer(generation("Why is grass green?", "abcd")).text != one.text
    specs = rubric_generation.GeneratedRubrics.model_validate_json(one.text).specs()
    assert {stage: len(items) for stage, items in specs.items()} == {
        "plan": 3,
        "research": 2,
        "review": 2,
        "answer": 3,
    }


def test_any_other_schema_gets_its_smallest_instance() -> None:
    schema = {
        "type": "object",
        "required": ["labels", "ok"],
        "properties": {
            "labels": {"type": "array", "minItems": 2, "items": {"enum": ["support", "not"]}},
            "ok": {"type": "boolean"},
        },
    }
    assert minimal_instance(schema) == {"labels": ["support", "support"], "ok": True}
    reply = answer({**body("x"), "response_format": {"type": "json_object", "schema": schema}})
    assert json.loads(reply.text) == {"labels": ["support", "support"], "ok": True}


@pytest.mark.parametrize("design", ["generate", "choices"])
async def test_the_openai_backend_reads_its_answers(design: str) -> None:
    """Through the platform's own `openai` backend: a structured call and a choice call."""
    sim = JudgeSim(SimConfig(call_s=0.0, prefill_s=0.0, decode_s=0.0))
    backend = OpenAICompatBackend(
        base_url="http://sim/v1", model="judge-sim", transport=httpx.ASGITransport(app=sim)
    )
    try:
        messages = scoring.build_messages(
            question="Why?",
            stages={k: v.format(m="a") for k, v in STAGES.items()},  # type: ignore[misc]
            rubrics=rubrics(),
            max_chars_per_stage=2000,
        )
        if design == "generate":
            schema = scoring.sheet_schema(json_schema_for(scoring.ScoreSheet), n_rubrics=5)
            params = GenerationParams(json_schema=schema, schema_name="score_sheet")
            completion = await backend.complete(messages, params)
            scoring.check_sheet(
                scoring.ScoreSheet.model_validate_json(completion.text), n_rubrics=5
            )
            assert completion.prompt_tokens > 0 and completion.completion_tokens > 0
        else:
            assert await backend.choice_scoring_problem() is None
            scores = await backend.score_choices(messages, reply_prefix="", choices=("yes", "no"))
            again = await backend.score_choices(messages, reply_prefix="", choices=("yes", "no"))
            assert scores.logprobs == again.logprobs and set(scores.logprobs) == {"yes", "no"}
    finally:
        await backend.aclose()
