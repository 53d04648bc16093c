"""Console sessions: a signed cookie, and the CSRF token bound to it.

The cookie holds `{t: tenant, a: actor, exp: unix s, n: nonce}`, signed with HMAC-SHA256
under the console's signing key (`common.signing`, as scoped tokens are). Nothing is stored
on the server; the API key itself is never put in the cookie. Signing out is the cookie's
deletion; every session ends at `exp`, and rotating the signing key (the console secret, or
the internal token it is derived from) ends them all.

The CSRF token of a session is HMAC(key, "csrf" + nonce): every form carries it and every
state-changing request must present it (form field or `X-CSRF-Token` header, which htmx
sends), on top of SameSite=Strict and a same-origin check (`origin_allowed`).
"""

import hmac
import secrets
import time
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

from rubricate.common import signing

COOKIE_NAME: Final = "rubricate_console"
CSRF_FIELD: Final = "csrf"
CSRF_HEADER: Final = "X-CSRF-Token"
_LABEL: Final = b"rubricate console session v1"


class SessionError(ValueError):
    """Why a presented cookie is not a session (never shown to the caller verbatim)."""


@dataclass(frozen=True)
class Session:
    tenant: str
    actor: str
    """Who is signed in, as changes record it: the key's fingerprint, with the name given."""
    expires_at: int
    nonce: str


def signing_key(secret: str) -> bytes:
    return signing.derive_key(secret, _LABEL)


def issue(key: bytes, *, tenant: str, actor: str, ttl_s: int, now: float | None = None) -> str:
    """A new session's cookie value."""
    claims = {
        "t": tenant,
        "a": actor,
        "exp": int(time.time() if now is None else now) + ttl_s,
        "n": secrets.token_urlsafe(16),
    }
    return signing.sign(key, claims)


def read(key: bytes, value: str, *, now: float | None = None) -> Session:
    """The session a cookie value proves; SessionError when it proves none."""
    try:
        claims = signing.verify(key, value)
    except signing.SignatureError as exc:
        raise SessionError("bad signature" if exc.kind == "invalid" else "malformed") from exc
    try:
        session = Session(
            tenant=str(claims["t"]),
            actor=str(claims["a"]),
            expires_at=int(claims["exp"]),
            nonce=str(claims["n"]),
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise SessionError("malformed session") from exc
    if session.expires_at <= (time.time() if now is None else now):
        raise SessionError("expired")
    return session


def csrf_token(key: bytes, session: Session) -> str:
    return signing.mac(key, "csrf:" + session.nonce)


def csrf_valid(key: bytes, session: Session, presented: str | None) -> bool:
    return bool(presented) and hmac.compare_digest(str(presented), csrf_token(key, session))


def origin_allowed(origin: str | None, referer: str | None, host: str | None) -> bool:
    """A state-changing request must come from the console's own origin: its `Origin` (or,
    when a browser sends none, its `Referer`) names this host. Neither header: refused."""
    source = origin if origin and origin != "null" else referer
    if not source or not host:
        return False
    return urlsplit(source).netloc.lower() == host.lower()
