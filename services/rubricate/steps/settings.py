"""Prompt budgets and decoding of the step tasks on the model servers (env RUBRICATE_STEPS_)."""

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class StepTaskSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="RUBRICATE_STEPS_", extra="ignore")

    max_history_chars: int = Field(default=6000, ge=200)
    """The trajectory prefix h_t is clipped (head and tail kept) to this many characters."""
    max_action_chars: int = Field(default=2000, ge=100)
    """Each action or candidate is clipped to this many characters."""
    rubric_max_tokens: int = Field(default=400, ge=32)
    rubric_temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    """Default for step-rubric generation; a request may set its own (Co-ReAct samples at 0.7)."""
    verify_max_tokens: int = Field(default=600, ge=32)
    verify_temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    rank_max_tokens: int = Field(default=600, ge=32)
