"""API-key authentication and the tenant scope of every request.

Two kinds of caller:
- a trainer or operator with an API key (`Authorization: Bearer rk_…` or `X-API-Key`): the key
  decides the tenant; keys are kept only as SHA-256 hashes (`RUBRICATE_AUTH_API_KEYS`);
- another Rubricate service with the shared internal token (`RUBRICATE_AUTH_INTERNAL_TOKEN`): it
  acts for the tenant named in `X-Rubricate-Tenant` (the gateway forwards the caller's tenant).

A trainer that can only put a credential in a URL (OpenRLHF's URL mode: `Authorization:
Basic` from the URL's user-info) uses a short-lived path-scoped token instead of its key
(`common.scoped_tokens`); Basic credentials are read as `<any user>:<secret>`.

Only the gateway (the public API) takes API keys. The internal services (`INTERNAL_SERVICES`:
store, verifier, rubric-generator, miner) take the internal token only and refuse a tenant's
key with 403, so nothing reaches them around the gateway's limits, body checks and
idempotency; they need no key table.

Mode `open` (the embedded default) trusts the tenant header and is allowed on loopback only;
`assert_safe_bind` refuses anything else at start-up. Health, readiness and metrics are never
authenticated; everything else is, the OpenAPI document and docs pages included.
"""

import base64
import binascii
import hashlib
import hmac
import ipaddress
import logging
import re
import secrets
from typing import Final, Literal
from urllib.parse import quote, unquote

from fastapi import Request
from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict
from starlette.types import ASGIApp, Receive, Scope, Send

from rubricate.common import scoped_tokens
from rubricate.common.errors import error_json
from rubricate_client.headers import DEFAULT_TENANT, TENANT_HEADER

log = logging.getLogger("rubricate.auth")

KEY_PREFIX: Final = "rk_"
TENANT_RE: Final = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")
OPEN_PATHS: Final = frozenset({"/healthz", "/readyz", "/metrics"})
INTERNAL_SERVICES: Final = frozenset({"store", "verifier", "rubric-generator", "miner"})
"""Services only other services call: the internal token is their only credential."""
MIN_TOKEN_CHARS: Final = 16
MIN_TOKEN_DISTINCT_CHARS: Final = 8
_PLACEHOLDERS: Final = (
    "changeme",
    "change-me",
    "change_me",
    "replaceme",
    "replace-me",
    "replace_me",
    "placeholder",
    "example",
    "secret-token",
    "your-token",
    "xxxxxxxx",
    "todo",
)
_HASH_RE = re.compile(r"^[0-9a-f]{64}$")
_STATE_TENANT = "auth_tenant"
_STATE_SCOPED = "auth_scoped_token"
_STATE_ACTOR = "auth_actor"
_STATE_OWN_SESSION = "auth_own_session"
ACTOR_HEADER: Final = "X-Rubricate-Actor"
"""Who acts, as a service (the console) names the signed-in person, percent-encoded UTF-8
(`actor_header_value`); trusted from the internal credential and in open mode only,
ignored with an API key."""
_ACTOR_HEADER_KEY = ACTOR_HEADER.lower().encode()
MAX_ACTOR_CHARS: Final = 200
_TENANT_HEADER_KEY = TENANT_HEADER.lower().encode()


class AuthSettings(BaseSettings):
    """Authentication (env prefix RUBRICATE_AUTH_)."""

    model_config = SettingsConfigDict(env_prefix="RUBRICATE_AUTH_", extra="ignore")

    mode: Literal["open", "api_key"] = "open"
    """`api_key` in production; `open` trusts the tenant header and is for loopback only."""
    api_keys: str = ""
    """Comma-separated `tenant:sha256hex` entries (`rubricate keys create` prints one)."""
    internal_token: SecretStr | None = Field(default=None)
    """Shared secret the services use to call each other (required in `api_key` mode)."""

    @field_validator("api_keys")
    @classmethod
    def _check_keys(cls, value: str) -> str:
        parse_key_table(value)
        return value

    def key_table(self) -> dict[str, str]:
        return parse_key_table(self.api_keys)

    def check(self, *, tenant_keys: bool = True) -> None:
        """Misconfiguration fails loudly at start-up, not at the first request.

        `tenant_keys`: whether this service takes API keys (the gateway); an internal
        service needs only the internal token."""
        if self.mode == "api_key":
            if tenant_keys and not self.key_table():
                raise ValueError("RUBRICATE_AUTH_MODE=api_key needs RUBRICATE_AUTH_API_KEYS")
            token = self.internal_token.get_secret_value() if self.internal_token else ""
            problem = token_problem(token)
            if problem is None and hash_key(token) in self.key_table():
                problem = "it is also a tenant's API key"
            if problem is not None:
                raise ValueError(
                    "RUBRICATE_AUTH_MODE=api_key needs RUBRICATE_AUTH_INTERNAL_TOKEN: a random "
                    f"secret of at least {MIN_TOKEN_CHARS} characters, the same on every "
                    f"service (`openssl rand -hex 32`); {problem}"
                )


def token_problem(token: str) -> str | None:
    """Why `token` is no internal credential (None when it is fine)."""
    if not token:
        return "it is not set"
    if len(token) < MIN_TOKEN_CHARS:
        return f"it has {len(token)} characters"
    lowered = token.lower()
    if any(p in lowered for p in _PLACEHOLDERS):
        return "it looks like a placeholder"
    if len(set(token)) < MIN_TOKEN_DISTINCT_CHARS:
        return "it is not random (too few distinct characters)"
    return None


def parse_key_table(value: str) -> dict[str, str]:
    """`tenant:hash,tenant:hash` -> {hash: tenant}; rejects malformed entries by position."""
    table: dict[str, str] = {}
    for n, raw in enumerate(p.strip() for p in value.split(",")):
        if not raw:
            continue
        tenant, sep, digest = raw.partition(":")
        if not sep or not TENANT_RE.match(tenant) or not _HASH_RE.match(digest.lower()):
            raise ValueError(
                f"RUBRICATE_AUTH_API_KEYS entry {n}: expected 'tenant:<64 hex sha256>', "
                f"got {raw[:24]!r}…"
            )
        table[digest.lower()] = tenant
    return table


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def new_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def internal_headers(settings: AuthSettings | None = None) -> dict[str, str]:
    """Headers a service adds to its calls to other services."""
    cfg = settings or AuthSettings()
    if cfg.internal_token is None:
        return {}
    return {"Authorization": f"Bearer {cfg.internal_token.get_secret_value()}"}


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def assert_safe_bind(settings: AuthSettings, *, host: str, service: str) -> None:
    """Open mode only on loopback; say loudly that it is open."""
    settings.check(tenant_keys=service not in INTERNAL_SERVICES)
    if settings.mode == "open":
        if not is_loopback(host):
            raise SystemExit(
                f"rubricate {service}: refusing to listen on {host} without authentication; "
                "set RUBRICATE_AUTH_MODE=api_key with RUBRICATE_AUTH_API_KEYS and "
                "RUBRICATE_AUTH_INTERNAL_TOKEN, or bind to 127.0.0.1"
            )
        log.warning(
            "auth.open service=%s host=%s: NO AUTHENTICATION - any local caller picks its "
            "tenant with the %s header (embedded/development mode only)",
            service,
            host,
            TENANT_HEADER,
        )


def _presented_secret(headers: dict[bytes, bytes]) -> str | None:
    raw = headers.get(b"authorization")
    if raw:
        scheme, _, value = raw.decode("latin-1").partition(" ")
        if scheme.lower() == "bearer" and value.strip():
            return value.strip()
        if scheme.lower() == "basic" and value.strip():
            # URL user-info (`http://rubricate:<secret>@gateway/...`), the one credential
            # OpenRLHF's URL mode can carry: the password is the secret, the user is ignored
            try:
                decoded = base64.b64decode(value.strip(), validate=True).decode()
            except (binascii.Error, UnicodeDecodeError):
                return None
            password = decoded.partition(":")[2].strip()
            return password or None
    api_key = headers.get(b"x-api-key")
    return api_key.decode("latin-1").strip() if api_key else None


class AuthMiddleware:
    """Authenticates every request but the open paths and records the caller's tenant.

    `tenant_keys`: whether API keys are accepted; default: everywhere but the
    `INTERNAL_SERVICES` (named by `service`), which take the internal token only."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        settings: AuthSettings,
        service: str | None = None,
        tenant_keys: bool | None = None,
        own_session_prefixes: tuple[str, ...] = (),
    ) -> None:
        if tenant_keys is None:
            tenant_keys = service not in INTERNAL_SERVICES
        settings.check(tenant_keys=tenant_keys)
        self.app = app
        self.own_session_prefixes = own_session_prefixes
        """Paths under these prefixes (the console) sign their users in themselves: no API
        credential is asked for here, and the tenant limits skip them (`is_own_session`)."""
        self.mode = settings.mode
        self.keys = settings.key_table()
        self.tenant_keys = tenant_keys
        self.service = service or "this service"
        token = settings.internal_token
        self.internal = token.get_secret_value().encode() if token else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and any(
            scope["path"] == p or scope["path"].startswith(p + "/")
            for p in self.own_session_prefixes
        ):
            scope.setdefault("state", {})[_STATE_OWN_SESSION] = True
            await self.app(scope, receive, send)
            return
        if scope["type"] != "http" or self.mode == "open" or scope["path"] in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        secret = _presented_secret(headers)
        claimed = headers.get(_TENANT_HEADER_KEY)
        claimed_tenant = claimed.decode("latin-1") if claimed else None
        if secret is None:
            await self._deny(scope, receive, send, 401, "missing API key (Authorization: Bearer)")
            return
        if self.internal is not None and hmac.compare_digest(secret.encode(), self.internal):
            # a service: the tenant and actor headers are trusted
            await self.app(scope, receive, send)
            return
        if self.tenant_keys and secret.startswith(scoped_tokens.TOKEN_PREFIX):
            await self._scoped(scope, receive, send, secret, claimed_tenant)
            return
        tenant = self.keys.get(hash_key(secret))
        if not self.tenant_keys:
            if tenant is not None:
                log.warning("auth.tenant_key_refused service=%s tenant=%s", self.service, tenant)
                await self._deny(
                    scope,
                    receive,
                    send,
                    403,
                    f"{self.service} is internal and accepts only the internal service "
                    "credential; call the gateway with your API key",
                )
            else:
                await self._deny(scope, receive, send, 401, "unknown credential")
            return
        if tenant is None:
            await self._deny(scope, receive, send, 401, "unknown API key")
            return
        if claimed_tenant is not None and claimed_tenant != tenant:
            await self._deny(
                scope,
                receive,
                send,
                403,
                f"this API key belongs to another tenant than {claimed_tenant!r}",
            )
            return
        state = scope.setdefault("state", {})
        state[_STATE_TENANT] = tenant
        state[_STATE_ACTOR] = key_actor(secret)
        await self.app(scope, receive, send)

    async def _scoped(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        secret: str,
        claimed_tenant: str | None,
    ) -> None:
        """A short-lived path-scoped token (`common.scoped_tokens`) in place of an API key."""
        if self.internal is None:
            await self._deny(scope, receive, send, 401, "scoped tokens are not enabled here")
            return
        try:
            token = scoped_tokens.verify(self.internal.decode(), secret)
        except scoped_tokens.TokenError as e:
            await self._deny(scope, receive, send, 401, str(e))
            return
        if token.tenant not in self.keys.values():
            await self._deny(scope, receive, send, 401, "scoped token of an unknown tenant")
            return
        if not token.allows(scope["path"]):
            await self._deny(
                scope,
                receive,
                send,
                403,
                f"this token is scoped to {', '.join(token.paths)}, not {scope['path']}",
            )
            return
        if claimed_tenant is not None and claimed_tenant != token.tenant:
            await self._deny(
                scope,
                receive,
                send,
                403,
                f"this token belongs to another tenant than {claimed_tenant!r}",
            )
            return
        state = scope.setdefault("state", {})
        state[_STATE_TENANT] = token.tenant
        state[_STATE_SCOPED] = True
        state[_STATE_ACTOR] = f"token:{token.tenant}"
        await self.app(scope, receive, send)

    async def _deny(
        self, scope: Scope, receive: Receive, send: Send, status: int, msg: str
    ) -> None:
        request = Request(scope, receive)
        kind = "unauthorized" if status == 401 else "forbidden"
        headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
        response = error_json(request, status, type=kind, message=msg, headers=headers)
        await response(scope, receive, send)


def scope_tenant(scope: Scope) -> str:
    """The tenant of a request inside the auth middleware, for ASGI middleware that runs
    before routing: the key's tenant, else the (open-mode or service) header, else default."""
    state: dict[str, object] = scope.get("state") or {}
    tenant = state.get(_STATE_TENANT)
    if isinstance(tenant, str):
        return tenant
    for key, value in scope.get("headers") or []:
        if key == _TENANT_HEADER_KEY:
            return str(value.decode("latin-1"))
    return DEFAULT_TENANT


def used_scoped_token(request: Request) -> bool:
    """Whether the caller presented a scoped token rather than its API key."""
    return getattr(request.state, _STATE_SCOPED, False) is True


def authenticated_tenant(request: Request) -> str | None:
    """The tenant an API key proved, when the caller used one."""
    value = getattr(request.state, _STATE_TENANT, None)
    return value if isinstance(value, str) else None


def key_actor(secret: str) -> str:
    """How a change made with an API key is attributed: a fingerprint, never the key."""
    return f"key:{hash_key(secret)[:12]}"


def request_actor(request: Request) -> str:
    """Who made this request, for the record of a change: the API key's fingerprint; for a
    service (or in open mode) the `X-Rubricate-Actor` it sends, else `service`/`anonymous`."""
    actor = getattr(request.state, _STATE_ACTOR, None)
    if isinstance(actor, str):
        return actor
    named = " ".join(unquote(request.headers.get(ACTOR_HEADER, "")).split())[:MAX_ACTOR_CHARS]
    if named:
        return named
    settings: AuthSettings = getattr(request.app.state, "auth", None) or AuthSettings()
    return "anonymous" if settings.mode == "open" else "service"


def is_own_session(scope: Scope) -> bool:
    """Whether the request is for a path that signs its users in itself (the console)."""
    state: dict[str, object] = scope.get("state") or {}
    return state.get(_STATE_OWN_SESSION) is True


def actor_header_value(actor: str) -> str:
    """`actor` as the `X-Rubricate-Actor` header carries it: any name, in ASCII."""
    return quote(actor, safe=" ()[]:@.,-_'+")
