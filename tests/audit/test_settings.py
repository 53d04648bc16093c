import pytest

from rubricate.audit.miner.reference import build_reference_judge, reference_config
from rubricate.audit.settings import (
    AuditLLMSettings,
    AuditSettings,
    reference_design,
    reference_is_live,
)
from rubricate.llm.server import TaskSettings
from rubricate.llm.settings import LLMSettings
from rubricate.testing.fake_judge import FakeJudgeBackend


class ChoosingFake(FakeJudgeBackend):
    """A fake that claims to score choices, standing in for the embedded backend."""

    name = "embedded"
    supports_choice_scoring = True


class ServedChoosingFake(FakeJudgeBackend):
    """A fake standing in for a served backend that returns log-probabilities."""

    name = "openai"
    supports_choice_scoring = True


def test_the_audit_llm_settings_read_their_own_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RUBRICATE_LLM_BACKEND", "embedded")
    monkeypatch.setenv("RUBRICATE_AUDIT_LLM_BACKEND", "openai")
    monkeypatch.setenv("RUBRICATE_AUDIT_LLM_BASE_URL", "http://reference:8000/v1")
    monkeypatch.setenv("RUBRICATE_AUDIT_LLM_MODEL", "big-judge")
    own = AuditLLMSettings()
    assert own.backend == "openai" and own.model == "big-judge"
    assert own.cache == "off"
    assert not reference_is_live(own)
    config = reference_config(own)
    assert config.llm is own and not config.live


def test_without_a_reference_backend_the_live_model_is_the_reference(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("RUBRICATE_AUDIT_LLM_BACKEND", raising=False)
    monkeypatch.setenv("RUBRICATE_LLM_EMBEDDED_MODEL", "smollm2-135m")
    config = reference_config(AuditLLMSettings())
    assert config.live and config.llm.embedded_model == "smollm2-135m"


def test_the_live_model_as_reference_scores_with_the_other_design() -> None:
    live = reference_config(AuditLLMSettings(), LLMSettings())
    assert live.live
    judge = build_reference_judge(audit=AuditSettings(), config=live, backend=ChoosingFake())
    assert judge.design == "generate"  # the live judge scores choices (auto on this backend)
    judge = build_reference_judge(
        audit=AuditSettings(),
        config=live,
        backend=ChoosingFake(),
        tasks=TaskSettings(scoring_design="generate"),
    )
    assert judge.design == "choices"


def test_a_served_live_model_as_reference_takes_the_design_auto_does_not_give_it() -> None:
    """On a served backend with log-probabilities and a shared prefix cache `auto` gives the
    live judge `generate` (measured, docs/llm.md), so its own reference scores choices; on
    llama-server's slots `auto` gives `choices`, so the reference writes score sheets."""
    served = LLMSettings(backend="openai", base_url="http://judge/v1")
    live = reference_config(AuditLLMSettings(), served)
    judge = build_reference_judge(audit=AuditSettings(), config=live, backend=ServedChoosingFake())
    assert judge.design == "choices"
    slots = served.model_copy(update={"prefix_cache": "per_slot", "concurrency": 4})
    live = reference_config(AuditLLMSettings(), slots)
    judge = build_reference_judge(audit=AuditSettings(), config=live, backend=ServedChoosingFake())
    assert judge.design == "generate"


def test_a_backend_with_one_design_cannot_be_its_own_reference() -> None:
    live = reference_config(AuditLLMSettings(), LLMSettings())
    with pytest.raises(ValueError, match="RUBRICATE_AUDIT_LLM_BACKEND"):
        build_reference_judge(audit=AuditSettings(), config=live, backend=FakeJudgeBackend())


def test_a_configured_reference_scores_with_its_own_design() -> None:
    assert (
        reference_design(
            live_design="generate", reference_is_live=False, wanted=None, can_choose=False
        )
        == "auto"
    )
    assert (
        reference_design(
            live_design="choices", reference_is_live=True, wanted="choices", can_choose=True
        )
        == "choices"
    )


def test_audit_settings_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    assert AuditSettings().fraction == 0.05
    monkeypatch.setenv("RUBRICATE_AUDIT_FRACTION", "1.5")
    with pytest.raises(ValueError):
        AuditSettings()
