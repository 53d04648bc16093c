"""The choices design of stagewise scoring (StageScoringService) against a fake choice-scoring
backend (named as a fake): design selection, expected scores, the shared prompt prefix,
retries, failures, and the core's use of expected scores.
The answer's assertion-unit reading is off here: its model calls would mix into the calls
these tests count (it has its own tests: tests/stagewise/verifier/test_units.py)."""

import asyncio
import math
from collections.abc import Sequence

import pytest

from rubricate.core.rubrics import make_rubric
from rubricate.llm.base import ChoiceScores, Completion, GenerationParams, LLMBackend, Message
from rubricate.llm.errors import BackendRequestError, TransportError
from rubricate.llm.server import TaskSettings
from rubricate.llm.settings import LLMSettings
from rubricate.stagewise.domain.scoring import stage_score
from rubricate.stagewise.prompts import scoring as stage_scoring
from rubricate.stagewise.verifier.schemas import StageScoresRequest
from rubricate.stagewise.verifier.service import StageScoringService
from rubricate.testing.fake_judge import FakeJudgeBackend
from rubricate_client.errors import DomainError
from rubricate_client.schemas.rubrics import Judgment, Rubric, RubricSpec

FAST = LLMSettings(max_retries=2, backoff_base_s=0.001, backoff_max_s=0.002)


class FakeYesNoBackend(LLMBackend):
    """A fake whose p(yes) per rubric comes from a table keyed by the rubric's title."""

    name = "embedded"  # stands in for the backend kind that scores choices
    supports_choice_scoring = True

    def __init__(self, p_yes: dict[str, float], *, fail_first: int = 0) -> None:
        self.model = "fake-model"
        self.p_yes = p_yes
        self.fail_first = fail_first
        self.prompts: list[str] = []
        self.attempts = 0

    async def complete(self, messages: Sequence[Message], params: GenerationParams) -> Completion:
        raise AssertionError("the choices design must not generate")

    async def score_choices(
        self, messages: Sequence[Message], *, reply_prefix: str, choices: Sequence[str]
    ) -> ChoiceScores:
        assert reply_prefix == "" and tuple(choices) == ("yes", "no")
        self.attempts += 1
        if self.fail_first:
            self.fail_first -= 1
            raise TransportError("model server went away")
        prompt = messages[-1].content
        self.prompts.append(prompt)
        await asyncio.sleep(0)  # lets concurrent requests interleave unless they are kept apart
        question = prompt.rsplit("Consider only rubric", 1)[1]
        p = next(v for k, v in self.p_yes.items() if k in question)
        return ChoiceScores(
            logprobs={"yes": math.log(p), "no": math.log(1 - p)},
            prompt_tokens=50,
            latency_s=0.01,
            model=self.model,
            backend=self.name,
        )


def rubric(title: str, *, stage: str = "answer", polarity: str = "positive") -> Rubric:
    spec = RubricSpec(title=title, description=f"{title} in detail", polarity=polarity)  # type: ignore[arg-type]
    return make_rubric(spec=spec, stage=stage, origin="active")  # type: ignore[arg-type]


RUBRICS = [
    rubric("Cites sources"),
    rubric("Invents facts", polarity="negative"),
    rubric("Plans searches", stage="plan"),
]
REQUEST = StageScoresRequest(
    question="Who founded Pew?",
    stages={"plan": "search Pew", "research": None, "review": None, "answer": "Pew [1]."},
    rubrics=RUBRICS,
)


def service(backend: LLMBackend, design: str = "auto") -> StageScoringService:
    return StageScoringService(
        backend=backend,
        tasks=TaskSettings(scoring_design=design, unit_reading="off"),  # type: ignore[arg-type]
        llm=FAST,
    )


async def test_auto_picks_choices_and_scores_expected_values() -> None:
    backend = FakeYesNoBackend({"Cites sources": 0.8, "Invents facts": 0.3, "Plans": 0.45})
    svc = service(backend)
    assert svc.design == "choices"
    out = await svc.stage_scores(REQUEST)
    by_title = {r.title: j for r, j in zip(RUBRICS, out.judgments, strict=True)}
    assert [j.rubric_id for j in out.judgments] == [r.id for r in RUBRICS]
    assert by_title["Cites sources"].expected_score == pytest.approx(1.6)
    assert by_title["Cites sources"].score == 2
    assert by_title["Invents facts"].expected_score == pytest.approx(0.6)
    assert by_title["Invents facts"].score == 0
    assert by_title["Plans searches"].score == 0  # p(yes) 0.45 < 0.5
    assert "p(yes) = 0.800" in by_title["Cites sources"].justification
    assert out.usage.calls == 3 and out.usage.prompt_tokens == 150
    assert out.usage.completion_tokens == 0


async def test_prompts_share_everything_but_the_final_question() -> None:
    backend = FakeYesNoBackend({"Cites sources": 0.5, "Invents facts": 0.5, "Plans": 0.5})
    await service(backend).stage_scores(REQUEST)
    heads = {p.rsplit("Consider only rubric", 1)[0] for p in backend.prompts}
    assert len(heads) == 1  # one cached prefix for every rubric of the trajectory
    head = heads.pop()
    assert "Pew [1]." in head and "search Pew" in head
    assert backend.prompts[0].endswith(
        "Consider only rubric 1: Cites sources. Does the trajectory fully meet this rubric? "
        "Reply yes or no."
    )
    assert backend.prompts[1].endswith(  # a negative rubric asks whether the flaw is there
        "Consider only rubric 2: Invents facts. Does the trajectory fully show this flaw? "
        "Reply yes or no."
    )


async def test_transport_failures_are_retried_then_reported() -> None:
    backend = FakeYesNoBackend({"Cites": 0.9, "Invents": 0.1, "Plans": 0.9}, fail_first=2)
    out = await service(backend).stage_scores(REQUEST)
    assert len(out.judgments) == 3 and backend.attempts == 5  # 2 failed, then 3 rubrics
    dead = FakeYesNoBackend({"Cites": 0.9}, fail_first=100)
    with pytest.raises(TransportError):
        await service(dead).stage_scores(REQUEST)
    assert dead.attempts == 3  # FAST allows 2 retries; no rubric is scored without the judge


async def test_missing_or_non_finite_choice_scores_fail_the_request() -> None:
    class Broken(FakeYesNoBackend):
        async def score_choices(
            self, messages: Sequence[Message], *, reply_prefix: str, choices: Sequence[str]
        ) -> ChoiceScores:
            return ChoiceScores(
                logprobs={"yes": float("nan"), "no": -1.0},
                prompt_tokens=1,
                latency_s=0.0,
                model=self.model,
                backend=self.name,
            )

    with pytest.raises(BackendRequestError, match="scored"):
        await service(Broken({})).stage_scores(REQUEST)


def test_choices_needs_a_choice_scoring_backend_and_generate_can_be_forced() -> None:
    judge = FakeJudgeBackend()
    assert service(judge).design == "generate"
    with pytest.raises(DomainError, match="SCORING_DESIGN=choices"):
        service(judge, "choices")
    assert service(FakeYesNoBackend({}), "generate").design == "generate"


@pytest.mark.parametrize(
    ("name", "llm", "design"),
    [
        ("embedded", LLMSettings(), "choices"),
        # llama-cpp-python's server: generate measured faster
        (
            "openai",
            LLMSettings(backend="openai", base_url="http://j/v1", concurrency=1),
            "generate",
        ),
        # vLLM's shared prefix cache: not measured, generate
        ("openai", LLMSettings(backend="openai", base_url="http://j/v1"), "generate"),
        # llama-server's slots: choices measured fastest
        (
            "openai",
            LLMSettings(
                backend="openai", base_url="http://j/v1", concurrency=4, prefix_cache="per_slot"
            ),
            "choices",
        ),
        (
            "openai",
            LLMSettings(
                backend="openai", base_url="http://j/v1", concurrency=1, prefix_cache="per_slot"
            ),
            "choices",
        ),
    ],
)
def test_auto_gives_the_design_measured_on_the_backend(
    name: str, llm: LLMSettings, design: str
) -> None:
    backend = FakeYesNoBackend({})
    backend.name = name  # the fake stands in for that backend kind
    chosen = StageScoringService(backend=backend, tasks=TaskSettings(), llm=llm).design
    assert chosen == design


def test_choice_judgment_from_log_probabilities() -> None:
    r = rubric("Cites sources")
    j = stage_scoring.choice_judgment(r, {"yes": math.log(0.2), "no": math.log(0.6)})
    assert j.expected_score == pytest.approx(2 * 0.25)  # renormalised over yes/no
    assert j.score == 0 and j.value == pytest.approx(0.5)


def test_stage_score_uses_expected_scores_when_present() -> None:
    a, b = rubric("Cites sources"), rubric("Invents facts", polarity="negative")
    judgments = {
        a.id: Judgment(rubric_id=a.id, stage="answer", score=2, expected_score=1.5),
        b.id: Judgment(rubric_id=b.id, stage="answer", score=0, expected_score=0.5),
    }
    # weights 2 and 2: contributions 1.5/2 = 0.75 and 1 - 0.5/2 = 0.75
    assert stage_score([a, b], judgments, stage="answer") == pytest.approx(0.75)
    plain = {
        k: Judgment(rubric_id=j.rubric_id, stage="answer", score=j.score)
        for k, j in judgments.items()
    }
    assert stage_score([a, b], plain, stage="answer") == pytest.approx(1.0)


async def test_concurrent_requests_on_the_embedded_model_do_not_interleave() -> None:
    backend = FakeYesNoBackend({"Cites sources": 0.5, "Invents facts": 0.5, "Plans": 0.5})
    svc = service(backend)
    other = REQUEST.model_copy(update={"stages": {**REQUEST.stages, "answer": "Other [2]."}})
    await asyncio.gather(svc.stage_scores(REQUEST), svc.stage_scores(other))
    answers = ["Pew [1]." in p for p in backend.prompts]
    # each request's three rubric passes run back to back, so its trajectory stays cached
    assert answers in ([True] * 3 + [False] * 3, [False] * 3 + [True] * 3)
