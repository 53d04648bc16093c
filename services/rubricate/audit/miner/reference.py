"""The reference judge: the verifier's stagewise scoring task on the reference backend.

`RUBRICATE_AUDIT_LLM_BACKEND` set: that backend (any of the three kinds), scoring with
`RUBRICATE_AUDIT_SCORING_DESIGN` (default `auto`). Unset: the live model (`RUBRICATE_LLM_*`)
scoring with the other design than the live judge's; a backend with one design only (not
able to score choices) cannot be its own reference, and the audit says so at start-up."""

from dataclasses import dataclass

from sqlalchemy import Engine

from rubricate.audit.miner.repository import AuditRepository
from rubricate.audit.miner.runner import AuditRuntime
from rubricate.audit.settings import (
    AuditLLMSettings,
    AuditSettings,
    reference_design,
    reference_is_live,
)
from rubricate.llm.base import LLMBackend
from rubricate.llm.factory import build_backend
from rubricate.llm.server import TaskSettings
from rubricate.llm.settings import LLMSettings
from rubricate.stagewise.verifier.service import StageScoringService, chosen_design


@dataclass(frozen=True)
class ReferenceJudgeConfig:
    llm: LLMSettings
    """The reference backend's settings (the live ones when the reference is the live model)."""
    live: bool
    """True when the reference is the live model with the other scoring design."""


def reference_config(
    audit_llm: AuditLLMSettings | None = None, live_llm: LLMSettings | None = None
) -> ReferenceJudgeConfig:
    own = audit_llm if audit_llm is not None else AuditLLMSettings()
    if reference_is_live(own):
        return ReferenceJudgeConfig(llm=live_llm or LLMSettings(), live=True)
    return ReferenceJudgeConfig(llm=own, live=False)


def build_reference_judge(
    *,
    audit: AuditSettings,
    config: ReferenceJudgeConfig,
    tasks: TaskSettings | None = None,
    backend: LLMBackend | None = None,
) -> StageScoringService:
    """The reference judge. `backend`: an already loaded backend for `config.llm` (embedded
    mode passes the live model's, so it is not loaded twice); else one is built (blocking)."""
    live_tasks = tasks or TaskSettings()
    model = backend if backend is not None else build_backend(config.llm, judge="reference")
    # the live judge's design counts only when the live model is its own reference (else
    # reference_design answers `auto`, and the live design may not even exist here)
    live = chosen_design(live_tasks.scoring_design, model, config.llm) if config.live else None
    design = reference_design(
        live_design=live or "generate",
        reference_is_live=config.live,
        wanted=audit.scoring_design,
        can_choose=model.supports_choice_scoring,
    )
    return StageScoringService(
        backend=model,
        tasks=live_tasks.model_copy(update={"scoring_design": design}),
        llm=config.llm,
    )


def build_audit_runtime(
    engine: Engine,
    *,
    audit: AuditSettings | None = None,
    config: ReferenceJudgeConfig | None = None,
    backend: LLMBackend | None = None,
    tasks: TaskSettings | None = None,
) -> AuditRuntime:
    cfg = audit or AuditSettings()
    judge = build_reference_judge(
        audit=cfg, config=config or reference_config(), backend=backend, tasks=tasks
    )
    return AuditRuntime(
        repo=AuditRepository(engine),
        judge=judge,
        model=judge.backend.model,
        design=judge.design,
        concurrency=cfg.judge_concurrency,
    )
