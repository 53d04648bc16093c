"""API-key authentication and the tenant scope of every request.

Two kinds of caller:
- a trainer or operator with an API key (`Authorization: Bearer rk_…` or `X-API-Key`): the key
  decides the tenant; keys are kept only as SHA-256 hashes (`RUBRICATE_AUTH_API_KEYS`);
- another Rubricate service with the shared internal token (`RUBRICATE_AUTH_INTERNAL_TOKEN`): it
  acts for the tenant named in `X-Rubricate-Tenant` (the gateway forwards the caller's tenant).

Mode `open` (the embedded default) trusts the tenant header and is allowed on loopback only;
`assert_safe_bind` refuses anything else at start-up. Health, readiness and metrics are never
authenticated; everything else is, the OpenAPI document and docs pages included.
"""

import hashlib
import hmac
import ipaddress
import logging
import re
import secrets
from typing import Final, Literal

from fastapi import Request
from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict
from starlette.types import ASGIApp, Receive, Scope, Send

from rubricate.common.errors import error_json

log = logging.getLogger("rubricate.auth")

KEY_PREFIX: Final = "rk_"
TENANT_HEADER: Final = "X-Rubricate-Tenant"
DEFAULT_TENANT: Final = "default"
TENANT_RE: Final = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")
OPEN_PATHS: Final = frozenset({"/healthz", "/readyz", "/metrics"})
_HASH_RE = re.compile(r"^[0-9a-f]{64}$")
_STATE_TENANT = "auth_tenant"
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

    def check(self) -> None:
        """Misconfiguration fails loudly at start-up, not at the first request."""
        if self.mode == "api_key":
            if not self.key_table():
                raise ValueError("RUBRICATE_AUTH_MODE=api_key needs RUBRICATE_AUTH_API_KEYS")
            token = self.internal_token.get_secret_value() if self.internal_token else ""
            if len(token) < 16:
                raise ValueError(
                    "RUBRICATE_AUTH_MODE=api_key needs RUBRICATE_AUTH_INTERNAL_TOKEN "
                    "(at least 16 characters, the same on every service)"
                )


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
    settings.check()
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
    api_key = headers.get(b"x-api-key")
    return api_key.decode("latin-1").strip() if api_key else None


class AuthMiddleware:
    """Authenticates every request but the open paths and records the caller's tenant."""

    def __init__(self, app: ASGIApp, *, settings: AuthSettings) -> None:
        settings.check()
        self.app = app
        self.mode = settings.mode
        self.keys = settings.key_table()
        token = settings.internal_token
        self.internal = token.get_secret_value().encode() if token else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
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
            await self.app(scope, receive, send)  # a service: the tenant header is trusted
            return
        tenant = self.keys.get(hash_key(secret))
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
        scope.setdefault("state", {})[_STATE_TENANT] = tenant
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


def authenticated_tenant(request: Request) -> str | None:
    """The tenant an API key proved, when the caller used one."""
    value = getattr(request.state, _STATE_TENANT, None)
    return value if isinstance(value, str) else None
