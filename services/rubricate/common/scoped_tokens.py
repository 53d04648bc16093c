"""Short-lived, path-scoped tokens: a credential that may sit in a trainer's logged arguments.

OpenRLHF's URL mode (`--remote_rm_url`) sends no headers of its own; the only credential it
can carry is the URL's user-info, which aiohttp turns into `Authorization: Basic`. Such a URL
ends up in the trainer's logged arguments and experiment trackers, so it must not hold a
long-lived API key. A scoped token is:

    rt_<payload>.<signature>    payload: base64url of {"t": tenant, "exp": unix s, "p": [paths]}

signed with HMAC-SHA256 under a key derived from the internal service token (which only the
services hold). It is accepted for its tenant, on its paths only, until it expires; it
cannot mint another token. Nothing is stored: revoking every token before its expiry means
rotating the internal token. A tenant gets one with its API key from `POST /v1/auth/tokens`
(or an operator with `rubricate keys token`).
"""

import time
from dataclasses import dataclass
from typing import Final

from rubricate.common import signing

TOKEN_PREFIX: Final = "rt_"
MAX_TTL_S: Final = 7 * 24 * 3600
DEFAULT_TTL_S: Final = 24 * 3600
_KEY_LABEL: Final = b"rubricate scoped token v1"


class TokenError(ValueError):
    """Why a presented scoped token is not accepted (safe to show to its holder)."""


@dataclass(frozen=True)
class ScopedToken:
    tenant: str
    expires_at: int
    paths: tuple[str, ...]

    def allows(self, path: str) -> bool:
        return path in self.paths


def _signing_key(internal_token: str) -> bytes:
    return signing.derive_key(internal_token, _KEY_LABEL)


def mint(
    internal_token: str,
    *,
    tenant: str,
    paths: tuple[str, ...],
    ttl_s: int,
    now: float | None = None,
) -> tuple[str, ScopedToken]:
    """A token for `tenant` on `paths`, valid `ttl_s` seconds (1 .. MAX_TTL_S)."""
    if not 1 <= ttl_s <= MAX_TTL_S:
        raise TokenError(f"ttl_s must be between 1 and {MAX_TTL_S} seconds, got {ttl_s}")
    if not paths:
        raise TokenError("a token needs at least one path")
    token = ScopedToken(
        tenant=tenant, expires_at=int(time.time() if now is None else now) + ttl_s, paths=paths
    )
    claims = {"t": token.tenant, "exp": token.expires_at, "p": list(token.paths)}
    return TOKEN_PREFIX + signing.sign(_signing_key(internal_token), claims), token


def verify(internal_token: str, presented: str, *, now: float | None = None) -> ScopedToken:
    """The token's claims, or TokenError saying why it is refused."""
    if not presented.startswith(TOKEN_PREFIX):
        raise TokenError("not a scoped token")
    try:
        claims = signing.verify(_signing_key(internal_token), presented[len(TOKEN_PREFIX) :])
    except signing.SignatureError as e:
        raise TokenError(f"{e.kind} scoped token") from e
    try:
        token = ScopedToken(
            tenant=str(claims["t"]),
            expires_at=int(claims["exp"]),
            paths=tuple(str(p) for p in claims["p"]),
        )
    except (KeyError, TypeError, ValueError) as e:
        raise TokenError("malformed scoped token") from e
    if (time.time() if now is None else now) >= token.expires_at:
        raise TokenError(f"scoped token expired at {token.expires_at} (unix seconds)")
    return token
