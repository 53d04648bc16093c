"""Short-lived, path-scoped tokens (`POST /v1/auth/tokens`): a credential a trainer may put in
a URL or a logged argument instead of its API key (OpenRLHF's URL mode)."""

from pydantic import BaseModel, ConfigDict, Field

DEFAULT_TOKEN_TTL_S = 24 * 3600
MAX_TOKEN_TTL_S = 7 * 24 * 3600


class ScopedTokenRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    ttl_s: int = Field(default=DEFAULT_TOKEN_TTL_S, ge=60, le=MAX_TOKEN_TTL_S)
    """Lifetime in seconds (default one day, at most a week)."""
    paths: list[str] = Field(default_factory=lambda: ["/get_reward"], min_length=1, max_length=8)
    """The gateway routes (exact paths, no path parameters) the token may call."""


class ScopedTokenResponse(BaseModel):
    token: str
    """`rt_…`: send it as `Authorization: Bearer <token>`, or as the password of the URL's
    user-info (`http://rubricate:<token>@gateway:8000/get_reward`)."""
    tenant: str
    expires_at: int
    """Unix seconds."""
    paths: list[str]
