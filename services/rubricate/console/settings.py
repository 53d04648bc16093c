"""Console settings (env prefix RUBRICATE_CONSOLE_)."""

from typing import Literal

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


class ConsoleSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="RUBRICATE_CONSOLE_", extra="ignore")

    enabled: bool = True
    """Serve the console at /console on the gateway."""
    session_ttl_s: int = Field(default=8 * 3600, ge=60, le=7 * 24 * 3600)
    """How long a sign-in lasts."""
    secret: SecretStr | None = None
    """Signs session cookies. Unset: derived from the internal service token (the same on
    every gateway replica), else random per process (open mode: one process, loopback)."""
    secure_cookie: Literal["auto", "always", "never"] = "auto"
    """`auto`: the cookie is Secure when the request came over TLS (directly, or through a
    proxy that sets X-Forwarded-Proto and that uvicorn trusts)."""
    page_size: int = Field(default=50, ge=5, le=200)
