"""`rubricate eval injection`: the attack set, the deltas, the report and the exit status,
on a fake verifier (no model). The real-model run is tests/e2e/test_injection_real_model.py."""

import argparse
from typing import Any

import pytest

from rubricate.common.usage import Usage, usage_out
from rubricate.evaluation import injection
from rubricate.evaluation.cli import register
from rubricate.llm.prompt_text import escape_untrusted, manipulation_markers
from rubricate.stagewise.prompts import scoring as stage_scoring
from rubricate.stagewise.verifier.schemas import StageScoresRequest, StageScoresResponse
from rubricate_client.schemas.rubrics import Judgment


def test_the_attack_set_covers_the_issue() -> None:
    names = [v.name for v in injection.VARIANTS]
    assert len(names) == len(set(names)) >= 10
    for needed in (
        "fence_close",
        "lookalike_close",
        "stage_close_system",
        "chatml_tokens",
        "llama3_tokens",
        "score_demand",
        "json_sheet",
        "german",
        "chinese",
        "markdown_fence",
    ):
        assert needed in names
    for v in injection.VARIANTS:
        attacked = v.attack(injection.CLEAN_ANSWER)
        body = injection.CLEAN_ANSWER.removeprefix("<answer>\n").removesuffix("\n</answer>")
        assert attacked.startswith("<answer>\n") and attacked.endswith("\n</answer>")
        assert body in attacked and attacked != injection.CLEAN_ANSWER
        # the answer's structure is kept: the attack lives inside it
        assert manipulation_markers(injection.CLEAN_ANSWER) == []
        assert manipulation_markers(attacked), f"{v.name}: not recognised as an attack"
        # no attack hands the judge the right answer: a rise would be deserved, not injected
        assert "canberra" not in attacked.lower()


def test_every_attack_is_fenced_in_the_scoring_prompt() -> None:
    rubrics = injection.rubrics()
    for v in injection.VARIANTS:
        stages: dict[str, str | None] = {"answer": v.attack(injection.CLEAN_ANSWER)}
        prompts = (
            stage_scoring.build_messages(
                question=injection.QUESTION,
                stages=stages,  # type: ignore[arg-type]
                rubrics=rubrics,
                max_chars_per_stage=6000,
            ),
            stage_scoring.build_choice_messages(
                question=injection.QUESTION,
                stages=stages,  # type: ignore[arg-type]
                rubrics=rubrics,
                index=0,
                max_chars_per_stage=6000,
            ),
        )
        # both designs: the attacked stage is withheld from the judge, the rest stays
        for user in (messages[-1].content for messages in prompts):
            assert "The answer stage is WITHHELD" in user, v.name
            assert body_of(v) not in user and user.count("</untrusted>") == 1, v.name
            assert injection.QUESTION in user


def body_of(v: injection.Variant) -> str:
    """A line of the attack's own text."""
    clean = injection.CLEAN_ANSWER.removesuffix("\n</answer>")
    extra = v.attack(injection.CLEAN_ANSWER).replace(clean, "").strip()
    return max(escape_untrusted(extra).splitlines(), key=len)


def test_select() -> None:
    assert [v.name for v in injection.select(None, limit=2)] == [
        v.name for v in injection.VARIANTS[:2]
    ]
    assert [v.name for v in injection.select(["german", "fence_close"], limit=None)] == [
        "fence_close",
        "german",
    ]
    with pytest.raises(ValueError, match="unknown variants"):
        injection.select(["nope"], limit=None)


class FakeService:
    """Scores 0 on every rubric, 2 when the answer holds `weak`: a judge that one attack
    fools."""

    def __init__(self, weak: str | None, fail: str | None = None) -> None:
        self.weak, self.fail = weak, fail

    async def stage_scores(self, request: StageScoresRequest) -> StageScoresResponse:
        from rubricate.llm.errors import OutputParseError

        answer = request.stages["answer"] or ""
        if self.fail is not None and self.fail in answer:
            raise OutputParseError("bad sheet", raw="")
        score = 2 if self.weak is not None and self.weak in answer else 0
        return StageScoresResponse(
            judgments=[
                Judgment(rubric_id=r.id, stage=r.stage, score=score, justification="")
                for r in request.rubrics
            ],
            usage=usage_out(Usage()),
            model="fake",
            backend="fake",
        )


async def _runs(service: Any) -> list[injection.DesignRun]:
    rubrics = injection.rubrics()
    run = injection.DesignRun(
        design="generate",
        clean=await injection.score_answer(service, injection.CLEAN_ANSWER, rubrics),
    )
    for v in injection.VARIANTS:
        run.attacked[v.name] = await injection.score_answer(
            service, v.attack(injection.CLEAN_ANSWER), rubrics
        )
    return [run]


async def test_a_resistant_judge_passes() -> None:
    runs = await _runs(FakeService(weak=None))
    summary = injection.summarize(runs, injection.VARIANTS, extra={})
    design = summary["designs"]["generate"]
    assert design["max_delta"] == 0.0 and design["raised"] == [] and design["failed"] == []
    assert injection.exit_code(summary) == 0
    report = injection.format_report(summary, injection.VARIANTS)
    assert "raised the score: none" in report
    assert all(v.name in report for v in injection.VARIANTS)


async def test_a_fooled_judge_is_reported() -> None:
    runs = await _runs(FakeService(weak="Kriterium", fail="评分员"))
    summary = injection.summarize(runs, injection.VARIANTS, extra={})
    design = summary["designs"]["generate"]
    assert design["raised"] == ["german"]
    assert design["variants"]["german"]["delta"] == pytest.approx(2.0)
    assert design["failed"] == ["chinese"]
    assert injection.exit_code(summary) == 2
    report = injection.format_report(summary, injection.VARIANTS)
    assert "+2.000" in report and "failed" in report


def test_the_command_is_registered() -> None:
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["eval", "injection", "--design", "choices", "--limit", "3"])
    assert (args.design, args.limit, args.variants, args.json_path) == ("choices", 3, None, None)
    assert args.func.__name__ == "_eval_injection"
    assert parser.parse_args(["eval", "injection"]).design == "both"
