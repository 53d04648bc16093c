"""Short-lived path-scoped tokens (`common.scoped_tokens`, `POST /v1/auth/tokens`) and Basic
credentials from a URL's user-info: how OpenRLHF's URL mode authenticates without an API key
in its logs."""

import base64

import httpx
import pytest
from fastapi import APIRouter
from pydantic import SecretStr

from rubricate.common import scoped_tokens
from rubricate.common.app import create_service_app
from rubricate.common.auth import AuthSettings, hash_key, new_key
from rubricate.common.tenancy import TenantDep
from rubricate.common.token_routes import router as token_router
from rubricate_client.endpoints import AUTH_TOKEN

KEY_A = new_key()
KEY_B = new_key()
INTERNAL = "internal-token-0123456789"


def settings(mode: str = "api_key", internal: str = INTERNAL) -> AuthSettings:
    return AuthSettings(
        mode=mode,  # type: ignore[arg-type]
        api_keys=f"team-a:{hash_key(KEY_A)}, team-b:{hash_key(KEY_B)}",
        internal_token=SecretStr(internal),
    )


def client(auth: AuthSettings, service: str = "gateway") -> httpx.AsyncClient:
    router = APIRouter()

    @router.post("/get_reward")
    async def reward(tenant: TenantDep = "default") -> dict[str, str]:
        return {"tenant": tenant}

    @router.post("/v1/stagewise/score")
    async def stagewise(tenant: TenantDep = "default") -> dict[str, str]:
        return {"tenant": tenant}

    app = create_service_app(service=service, title="t", routers=[router, token_router], auth=auth)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t")


def basic(secret: str, user: str = "rubricate") -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{secret}".encode()).decode()}


def test_mint_and_verify() -> None:
    secret, token = scoped_tokens.mint(
        INTERNAL, tenant="team-a", paths=("/get_reward",), ttl_s=60, now=1000
    )
    assert secret.startswith("rt_") and token.expires_at == 1060
    assert scoped_tokens.verify(INTERNAL, secret, now=1059) == token
    with pytest.raises(scoped_tokens.TokenError, match="expired at 1060"):
        scoped_tokens.verify(INTERNAL, secret, now=1060)
    with pytest.raises(scoped_tokens.TokenError, match="invalid"):
        scoped_tokens.verify("another-internal-token-xyz", secret, now=1000)
    sig = secret.partition(".")[2]
    forged = scoped_tokens.mint(
        "attacker-chosen-token-123", tenant="team-b", paths=("/get_reward",), ttl_s=60, now=1000
    )[0]
    with pytest.raises(scoped_tokens.TokenError, match="invalid"):  # team-b claims, team-a sig
        scoped_tokens.verify(INTERNAL, forged.partition(".")[0] + "." + sig, now=1000)
    for bad in ("rt_nodot", "rt_%%%.###", "rk_x"):
        with pytest.raises(scoped_tokens.TokenError):
            scoped_tokens.verify(INTERNAL, bad, now=1000)
    with pytest.raises(scoped_tokens.TokenError, match="ttl_s"):
        scoped_tokens.mint(INTERNAL, tenant="t", paths=("/get_reward",), ttl_s=0)


async def test_a_url_credential_is_read_from_basic_auth() -> None:
    """aiohttp turns `http://rubricate:<secret>@host/get_reward` into Basic credentials."""
    async with client(settings()) as c:
        r = await c.post("/get_reward", headers=basic(KEY_B))
        assert r.status_code == 200 and r.json() == {"tenant": "team-b"}
        r = await c.post("/get_reward", headers={"Authorization": "Basic !!not-base64"})
        assert r.status_code == 401


async def test_a_scoped_token_works_on_its_paths_for_its_tenant_only() -> None:
    async with client(settings()) as c:
        r = await c.post(AUTH_TOKEN.path, json={"ttl_s": 3600}, headers={"X-API-Key": KEY_A})
        assert r.status_code == 200, r.text
        issued = r.json()
        assert issued["tenant"] == "team-a" and issued["paths"] == ["/get_reward"]
        token = issued["token"]
        assert KEY_A not in token and hash_key(KEY_A) not in token

        r = await c.post("/get_reward", headers=basic(token))
        assert r.status_code == 200 and r.json() == {"tenant": "team-a"}
        r = await c.post("/get_reward", headers={"Authorization": f"Bearer {token}"})
        assert r.json() == {"tenant": "team-a"}
        # another route: refused, naming the scope
        r = await c.post("/v1/stagewise/score", headers=basic(token))
        assert r.status_code == 403 and "/get_reward" in r.json()["error"]["message"]
        # another tenant claimed
        r = await c.post("/get_reward", headers={**basic(token), "X-Rubricate-Tenant": "team-b"})
        assert r.status_code == 403
        # a token cannot mint tokens: not with its scope, nor one scoped to the token route
        r = await c.post(AUTH_TOKEN.path, json={}, headers=basic(token))
        assert r.status_code == 403
        minter = scoped_tokens.mint(INTERNAL, tenant="team-a", paths=(AUTH_TOKEN.path,), ttl_s=60)
        r = await c.post(AUTH_TOKEN.path, json={}, headers=basic(minter[0]))
        assert r.status_code == 403 and "cannot issue" in r.json()["error"]["message"]
        # tampered
        r = await c.post("/get_reward", headers=basic(token[:-2] + "AA"))
        assert r.status_code == 401


async def test_token_requests_are_checked() -> None:
    async with client(settings()) as c:
        for body, field in (
            ({"paths": ["/v1/auth/tokens"]}, "paths[0]"),
            ({"paths": ["/v1/buffers/{question_id}"]}, "paths[0]"),
            ({"paths": ["/get_reward", "/nope"]}, "paths[1]"),
            ({"ttl_s": 10}, "ttl_s"),
            ({"ttl_s": 30 * 24 * 3600}, "ttl_s"),
        ):
            r = await c.post(AUTH_TOKEN.path, json=body, headers={"X-API-Key": KEY_A})
            assert r.status_code == 422, (body, r.text)
            assert r.json()["error"]["field"] == field
    async with client(settings(mode="open")) as c:
        r = await c.post(AUTH_TOKEN.path, json={})
        assert r.status_code == 409 and r.json()["error"]["type"] == "auth_tokens_disabled"


async def test_rotating_the_internal_token_revokes_tokens_and_internal_services_refuse_them() -> (
    None
):
    async with client(settings()) as c:
        r = await c.post(AUTH_TOKEN.path, json={}, headers={"X-API-Key": KEY_A})
        token = r.json()["token"]
    async with client(settings(internal="rotated-internal-token-987")) as c:
        r = await c.post("/get_reward", headers=basic(token))
        assert r.status_code == 401 and "invalid scoped token" in r.json()["error"]["message"]
    async with client(settings(), service="store") as c:
        r = await c.post("/get_reward", headers=basic(token))
        assert r.status_code == 401
