"""The choices design of NuggetLabelService against a fake choice-scoring backend (named as
a fake): design selection, raw and calibrated labels, retries, calibration files, and the
wrappers (circuit breaker, judge cache) passing choice scoring through."""

import json
import math
from collections.abc import Sequence
from pathlib import Path

import pytest

from rubricate.llm.base import ChoiceScores, Completion, GenerationParams, LLMBackend, Message
from rubricate.llm.errors import TransportError
from rubricate.llm.factory import wrap_backend
from rubricate.llm.server import TaskSettings
from rubricate.llm.settings import LLMSettings
from rubricate.nuggets.domain.calibration import LabelCalibration
from rubricate.nuggets.verifier.schemas import NuggetLabelsRequest
from rubricate.nuggets.verifier.service import (
    REPLY_PREFIX,
    NuggetLabelService,
    NuggetTaskSettings,
    load_calibration,
    shipped_calibration,
)
from rubricate.testing.fake_judge import FakeJudgeBackend
from rubricate.testing.fake_nuggets import FakeNuggetLabeller
from rubricate_client.errors import DomainError

UNITS_OFF = TaskSettings(unit_reading="off")
"""The answer's assertion-unit reading is off in these tests of the labelling calls: its
model calls would mix into the calls they count (tests/nuggets/verifier/test_units.py)."""

FAST = LLMSettings(max_retries=2, backoff_base_s=0.001, backoff_max_s=0.002)
BLOCK = "Pew Research Center is a nonpartisan fact tank founded in 2004."


class FakeChoiceBackend(LLMBackend):
    """A fake that scores choices from a table keyed by a word of the nugget."""

    name = "embedded"  # stands in for the backend kind that scores choices
    supports_choice_scoring = True
    supports_reply_prefix = True

    def __init__(self, table: dict[str, dict[str, float]], *, fail_first: int = 0) -> None:
        self.model = "fake-model"
        self.table = table
        self.fail_first = fail_first
        self.calls: list[tuple[tuple[Message, ...], str, tuple[str, ...]]] = []

    async def complete(self, messages: Sequence[Message], params: GenerationParams) -> Completion:
        raise AssertionError("the choices design must not generate")

    async def score_choices(
        self, messages: Sequence[Message], *, reply_prefix: str, choices: Sequence[str]
    ) -> ChoiceScores:
        self.calls.append((tuple(messages), reply_prefix, tuple(choices)))
        if self.fail_first:
            self.fail_first -= 1
            raise TransportError("model server went away")
        prompt = messages[-1].content
        key = next(k for k in self.table if k in prompt.split("Nuggets to label:")[-1])
        probs = self.table[key]
        return ChoiceScores(
            logprobs={c: math.log(probs[c]) for c in choices},
            prompt_tokens=100,
            latency_s=0.01,
            model=self.model,
            backend=self.name,
        )


TABLE = {
    "fact tank": {"support": 0.6, "partial_support": 0.3, "not_support": 0.1},
    "2004": {"support": 0.2, "partial_support": 0.2, "not_support": 0.6},
    "advertisers": {"support": 0.05, "partial_support": 0.15, "not_support": 0.8},
}
NUGGETS = ["nonpartisan fact tank", "founded in 2004", "funded by advertisers"]


def request(**kw: object) -> NuggetLabelsRequest:
    return NuggetLabelsRequest(question="What is Pew?", blocks=[BLOCK], nuggets=NUGGETS, **kw)  # type: ignore[arg-type]


def overlap_calibration(model: str = "fake-model") -> LabelCalibration:
    """support when the word overlap is high, whatever the model said."""
    return LabelCalibration(
        model=model,
        weights={
            "support": (-6.0, 0.0, 0.0, 0.0, 10.0),
            "partial_support": (-20.0, 0.0, 0.0, 0.0, 0.0),
            "not_support": (0.0, 0.0, 0.0, 0.0, 0.0),
        },
    )


async def test_auto_picks_choices_and_labels_are_the_most_probable() -> None:
    backend = FakeChoiceBackend(TABLE)
    svc = NuggetLabelService(
        tasks=UNITS_OFF, backend=backend, llm=FAST, settings=NuggetTaskSettings(calibration="off")
    )
    assert svc.design == "choices" and svc.calibration is None
    out = await svc.label(request(label_probabilities=True, batch_size=10))
    assert out.design == "choices" and out.calibration is None
    assert out.batch_size == 1 and out.usage.calls == 3  # one pass per nugget, batch ignored
    assert out.blocks[0].labels == ["support", "not_support", "not_support"]
    probs = out.blocks[0].probabilities
    assert probs is not None and probs[0] == pytest.approx(TABLE["fact tank"])
    assert out.formats == ["choices"] * 3 and out.repairs == 0
    messages, prefix, choices = backend.calls[0]
    assert prefix == REPLY_PREFIX
    assert choices == ("support", "partial_support", "not_support")
    assert "nonpartisan fact tank" in messages[-1].content


async def test_short_mode_scores_two_choices_and_is_never_calibrated() -> None:
    backend = FakeChoiceBackend({"2004": {"support": 0.7, "not_support": 0.3}})
    svc = NuggetLabelService(tasks=UNITS_OFF, backend=backend, llm=FAST)
    svc.calibration = overlap_calibration()
    out = await svc.label(
        NuggetLabelsRequest(question="When?", blocks=["2004"], nuggets=["2004"], mode="short")
    )
    assert backend.calls[0][2] == ("support", "not_support")
    assert out.blocks[0].labels == ["support"] and out.calibration is None


async def test_a_calibration_turns_probabilities_and_overlap_into_the_label() -> None:
    backend = FakeChoiceBackend(TABLE)
    svc = NuggetLabelService(tasks=UNITS_OFF, backend=backend, llm=FAST)
    svc.calibration = overlap_calibration()
    out = await svc.label(request(label_probabilities=True))
    # "founded in 2004": overlap 1.0 (all content words in the block) -> support, although
    # the model said not_support; "funded by advertisers": overlap 0 -> not_support
    assert out.blocks[0].labels == ["support", "support", "not_support"]
    assert out.calibration == "fake-model"
    probs = out.blocks[0].probabilities
    assert probs is not None and probs[1] is not None
    assert probs[1]["support"] == pytest.approx(math.exp(4) / (math.exp(4) + 1 + math.exp(-20)))


async def test_transport_failures_are_retried_then_counted() -> None:
    backend = FakeChoiceBackend(TABLE, fail_first=2)
    svc = NuggetLabelService(
        tasks=UNITS_OFF, backend=backend, llm=FAST, settings=NuggetTaskSettings(calibration="off")
    )
    out = await svc.label(request())
    assert len(backend.calls) == 5 and out.blocks[0].labels[0] == "support"


async def test_a_persistent_failure_is_raised_not_labelled() -> None:
    backend = FakeChoiceBackend(TABLE, fail_first=10)
    svc = NuggetLabelService(
        tasks=UNITS_OFF, backend=backend, llm=FAST, settings=NuggetTaskSettings(calibration="off")
    )
    with pytest.raises(TransportError) as info:
        await svc.label(request())
    # three attempts (max_retries=2) of at least one nugget, then the error: no label
    assert info.value.usage.calls == 0 and len(backend.calls) >= 3


def test_design_generate_on_request_and_choices_refused_where_impossible() -> None:
    svc = NuggetLabelService(
        tasks=UNITS_OFF,
        backend=FakeChoiceBackend(TABLE),
        llm=FAST,
        settings=NuggetTaskSettings(design="generate"),
    )
    assert svc.design == "generate" and svc.calibration is None
    plain = FakeJudgeBackend(handlers={"nugget_labels": FakeNuggetLabeller()})
    assert NuggetLabelService(tasks=UNITS_OFF, backend=plain, llm=FAST).design == "generate"
    with pytest.raises(DomainError, match="needs a backend that scores choices"):
        NuggetLabelService(
            tasks=UNITS_OFF, backend=plain, llm=FAST, settings=NuggetTaskSettings(design="choices")
        )
    with pytest.raises(DomainError, match="without reasoning"):
        NuggetLabelService(
            tasks=UNITS_OFF,
            backend=FakeChoiceBackend(TABLE),
            llm=FAST,
            settings=NuggetTaskSettings(design="choices", reasoning=True),
        )


def test_calibration_files(tmp_path: Path) -> None:
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(overlap_calibration().to_json()))
    assert load_calibration(str(path), model="fake-model") == overlap_calibration()
    with pytest.raises(DomainError, match="fitted for 'fake-model'"):
        load_calibration(str(path), model="other-model")
    with pytest.raises(DomainError, match="cannot read it"):
        load_calibration(str(tmp_path / "missing.json"), model="fake-model")
    assert load_calibration("off", model="qwen2.5-coder-1.5b") is None
    assert load_calibration("auto", model="no-such-model") is None


def test_the_default_embedded_model_ships_a_calibration() -> None:
    cal = shipped_calibration(LLMSettings().embedded_model)
    assert cal is not None and cal.model == LLMSettings().embedded_model
    assert cal.cross_validated["pairs"] >= 300 and len(cal.topics) >= 50


async def test_circuit_breaker_and_judge_cache_pass_choice_scoring_through() -> None:
    inner = FakeChoiceBackend(TABLE, fail_first=1)
    wrapped = wrap_backend(inner, LLMSettings(cache="memory", circuit_failures=1))
    assert wrapped.supports_choice_scoring
    with pytest.raises(TransportError):
        await wrapped.score_choices(
            [Message("user", "Nuggets to label: fact tank")], reply_prefix="[", choices=["support"]
        )
    # one failure opened the circuit: the next call fails fast without reaching the model
    with pytest.raises(TransportError, match="circuit open"):
        await wrapped.score_choices(
            [Message("user", "Nuggets to label: fact tank")], reply_prefix="[", choices=["support"]
        )
    assert len(inner.calls) == 1
