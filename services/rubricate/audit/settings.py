"""Audit settings: what is audited (`RUBRICATE_AUDIT_*`) and the reference judge's backend
(`RUBRICATE_AUDIT_LLM_*`, the same fields and backend kinds as `RUBRICATE_LLM_*`).

With no `RUBRICATE_AUDIT_LLM_BACKEND` set, the reference judge is the live model scoring with
the other design (`choices` ↔ `generate`): a check of the judge's reading, not a stronger
judge (docs/audit.md, "What a reference judge is worth")."""

from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from rubricate.llm.settings import LLMSettings

Design = Literal["generate", "choices"]
WantedDesign = Literal["auto", "generate", "choices"]


class AuditLLMSettings(LLMSettings):
    """The reference judge's backend: every `LLMSettings` field, env prefix
    `RUBRICATE_AUDIT_LLM_`. Its judge cache is off by default: an audit that read the live
    judge's cached answers would agree with it by construction."""

    model_config = SettingsConfigDict(env_prefix="RUBRICATE_AUDIT_LLM_", extra="ignore")

    cache: Literal["off", "memory", "redis"] = "off"


class AuditSettings(BaseSettings):
    """Env: RUBRICATE_AUDIT_<FIELD>."""

    model_config = SettingsConfigDict(env_prefix="RUBRICATE_AUDIT_", extra="ignore")

    enabled: bool = True
    """Send scored groups to the audit (off: no submission at all)."""
    fraction: float = Field(default=0.05, ge=0.0, le=1.0)
    """Share of a tenant's scored groups the reference judge re-scores, drawn at random. A
    tenant's own setting wins."""
    max_share: float = Field(default=0.1, ge=0.0, le=1.0)
    """The most of a training step's groups the audit re-scores (the fraction, if larger,
    wins): a question's first audited group is taken only within it, so a first epoch,
    where every question is new, is not audited whole."""
    retention_days: int | None = Field(default=7, ge=0)
    """Days the trajectories of handed-over groups are kept for replay (0: off, kept only
    until a sampled group's audit is done; None: kept until deleted). A tenant's own
    setting wins."""
    scoring_design: WantedDesign | None = None
    """The reference judge's scoring design. None: the other design than the live judge's
    when the reference is the live model, `auto` when a reference backend is configured."""
    judge_concurrency: int = Field(default=4, ge=1)
    """Scoring calls of one audit in flight at once."""
    # signal thresholds (docs/audit.md, "Signals")
    gaming_min_steps: int = Field(default=3, ge=2)
    gaming_min_rise: float = Field(default=0.3, gt=0.0, le=2.0)
    """How much more a rubric's live mean must rise than the reference's, on the 0..2 scale."""
    drift_window: int = Field(default=3, ge=1)
    """Audited steps averaged at each end of the agreement-drift comparison."""
    signal_steps: int = Field(default=50, ge=2, le=10_000)
    """The latest training steps the signals are computed over."""
    addressing_window_h: float = Field(default=24.0, gt=0.0, le=24.0 * 365)
    """Hours over which the flagged requests of the other judge kinds (nugget, step,
    listwise, rank, reflection) are counted; older ones are deleted."""


def reference_is_live(audit_llm: AuditLLMSettings) -> bool:
    """True when no reference backend is configured (`RUBRICATE_AUDIT_LLM_BACKEND` unset)."""
    return "backend" not in audit_llm.model_fields_set


def reference_design(
    *, live_design: Design, reference_is_live: bool, wanted: WantedDesign | None, can_choose: bool
) -> WantedDesign:
    """The reference judge's scoring design (AuditSettings.scoring_design). The live model
    as its own reference needs the other design; with one design only (a backend that
    cannot score choices) it would just repeat the live judgment, so it is refused."""
    if wanted is not None:
        return wanted
    if not reference_is_live:
        return "auto"
    other: Design = "generate" if live_design == "choices" else "choices"
    if other == "choices" and not can_choose:
        raise ValueError(
            "the live backend has one scoring design (generate), so it cannot be its own "
            "reference judge: set RUBRICATE_AUDIT_LLM_BACKEND (and its URL or model)"
        )
    return other
