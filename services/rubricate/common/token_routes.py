"""`POST /v1/auth/tokens`: a tenant trades its API key for a short-lived path-scoped token
(`common.scoped_tokens`), e.g. for OpenRLHF's URL mode, where the credential ends up in logs."""

from fastapi import APIRouter, Request

from rubricate.common import scoped_tokens
from rubricate.common.auth import AuthSettings, authenticated_tenant, used_scoped_token
from rubricate.common.errors import ServiceError
from rubricate_client.endpoints import AUTH_TOKEN, PUBLIC_ROUTES
from rubricate_client.schemas.auth import ScopedTokenRequest, ScopedTokenResponse

router = APIRouter()

SCOPABLE_PATHS = frozenset(
    e.path for e in PUBLIC_ROUTES if not e.path_params and e.path != AUTH_TOKEN.path
)
"""Routes a token may name: public, without path parameters, never the token route."""


@router.post(AUTH_TOKEN.path, response_model=ScopedTokenResponse)
async def issue_token(body: ScopedTokenRequest, request: Request) -> ScopedTokenResponse:
    settings: AuthSettings = request.app.state.auth  # what the auth middleware enforces
    tenant = authenticated_tenant(request)
    if settings.mode != "api_key" or settings.internal_token is None or tenant is None:
        raise ServiceError(
            409,
            "scoped tokens need RUBRICATE_AUTH_MODE=api_key and a caller with an API key "
            "(in open mode no credential is needed at all)",
            type="auth_tokens_disabled",
        )
    if used_scoped_token(request):
        raise ServiceError(
            403, "a scoped token cannot issue tokens; use the API key", type="forbidden"
        )
    for n, path in enumerate(body.paths):
        if path not in SCOPABLE_PATHS:
            raise ServiceError(
                422,
                f"{path!r} is not a public route without path parameters",
                type="invalid_request",
                field=f"paths[{n}]",
            )
    secret, token = scoped_tokens.mint(
        settings.internal_token.get_secret_value(),
        tenant=tenant,
        paths=tuple(dict.fromkeys(body.paths)),
        ttl_s=body.ttl_s,
    )
    return ScopedTokenResponse(
        token=secret, tenant=token.tenant, expires_at=token.expires_at, paths=list(token.paths)
    )
