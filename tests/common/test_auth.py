"""API keys, the internal service token and the tenant they decide."""

from pathlib import Path

import httpx
import pytest
from fastapi import APIRouter
from pydantic import SecretStr, ValidationError

from rubricate.common.app import create_service_app
from rubricate.common.auth import (
    INTERNAL_SERVICES,
    AuthSettings,
    assert_safe_bind,
    hash_key,
    new_key,
)
from rubricate.common.tenancy import TenantDep
from rubricate.embedded import SERVICES, EmbeddedPlatform
from rubricate.gateway.settings import GatewaySettings
from rubricate.testing.fake_judge import FakeJudgeBackend
from tests.support.gateway import fast_llm, trajectory

KEY_A = new_key()
KEY_B = new_key()
INTERNAL = "internal-token-0123456789"


def settings(mode: str = "api_key") -> AuthSettings:
    return AuthSettings(
        mode=mode,  # type: ignore[arg-type]
        api_keys=f"team-a:{hash_key(KEY_A)}, team-b:{hash_key(KEY_B)}",
        internal_token=SecretStr(INTERNAL),
    )


def app_with(auth: AuthSettings) -> httpx.AsyncClient:
    router = APIRouter()

    @router.get("/v1/whoami")
    async def whoami(tenant: TenantDep = "default") -> dict[str, str]:
        return {"tenant": tenant}

    app = create_service_app(service="test", title="t", routers=[router], auth=auth)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t")


async def test_key_decides_the_tenant() -> None:
    async with app_with(settings()) as c:
        r = await c.get("/v1/whoami", headers={"Authorization": f"Bearer {KEY_A}"})
        assert r.status_code == 200 and r.json() == {"tenant": "team-a"}
        r = await c.get("/v1/whoami", headers={"X-API-Key": KEY_B})
        assert r.json() == {"tenant": "team-b"}


async def test_missing_unknown_and_mismatched_keys_are_refused() -> None:
    async with app_with(settings()) as c:
        r = await c.get("/v1/whoami")
        assert r.status_code == 401
        assert r.json()["error"]["type"] == "unauthorized"
        assert r.headers["www-authenticate"] == "Bearer"
        r = await c.get("/v1/whoami", headers={"Authorization": "Bearer rk_not-a-key"})
        assert r.status_code == 401 and "unknown API key" in r.json()["error"]["message"]
        r = await c.get(
            "/v1/whoami",
            headers={"Authorization": f"Bearer {KEY_A}", "X-Rubricate-Tenant": "team-b"},
        )
        assert r.status_code == 403 and r.json()["error"]["type"] == "forbidden"


async def test_internal_token_acts_for_the_forwarded_tenant() -> None:
    async with app_with(settings()) as c:
        r = await c.get(
            "/v1/whoami",
            headers={"Authorization": f"Bearer {INTERNAL}", "X-Rubricate-Tenant": "team-b"},
        )
        assert r.json() == {"tenant": "team-b"}


async def test_only_health_and_metrics_are_open() -> None:
    async with app_with(settings()) as c:
        assert (await c.get("/healthz")).status_code == 200
        assert (await c.get("/metrics")).status_code == 200
        assert (await c.get("/openapi.json")).status_code == 401
        ok = await c.get("/openapi.json", headers={"Authorization": f"Bearer {KEY_A}"})
        assert ok.status_code == 200


async def test_open_mode_trusts_the_header() -> None:
    async with app_with(AuthSettings(mode="open")) as c:
        r = await c.get("/v1/whoami", headers={"X-Rubricate-Tenant": "x1"})
        assert r.json() == {"tenant": "x1"}
        assert (await c.get("/v1/whoami")).json() == {"tenant": "default"}


def test_misconfiguration_fails_at_start() -> None:
    with pytest.raises(ValidationError, match="entry 1"):
        AuthSettings(api_keys=f"a:{hash_key('x')},b:nothex")
    with pytest.raises(ValueError, match="API_KEYS"):
        AuthSettings(mode="api_key", internal_token=SecretStr(INTERNAL)).check()
    with pytest.raises(ValueError, match="INTERNAL_TOKEN"):
        AuthSettings(mode="api_key", api_keys=f"a:{hash_key('x')}").check()


def test_open_mode_only_on_loopback() -> None:
    assert_safe_bind(AuthSettings(mode="open"), host="127.0.0.1", service="t")
    assert_safe_bind(AuthSettings(mode="open"), host="::1", service="t")
    with pytest.raises(SystemExit, match="refusing"):
        assert_safe_bind(AuthSettings(mode="open"), host="0.0.0.0", service="t")
    assert_safe_bind(settings(), host="0.0.0.0", service="t")


async def test_platform_with_keys_end_to_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every service refuses unauthenticated calls; the gateway's own upstream calls pass."""
    monkeypatch.setenv("RUBRICATE_AUTH_MODE", "api_key")
    monkeypatch.setenv("RUBRICATE_AUTH_API_KEYS", f"team-a:{hash_key(KEY_A)}")
    monkeypatch.setenv("RUBRICATE_AUTH_INTERNAL_TOKEN", INTERNAL)
    platform = EmbeddedPlatform(
        data_dir=tmp_path,
        ports=dict.fromkeys(SERVICES, 0),
        llm=fast_llm(),
        backend=FakeJudgeBackend(),
        gateway=GatewaySettings(upstream_retries=0),
    )
    body = {
        "question": "q?",
        "rollouts": [
            {"id": "a", "trajectory": trajectory("[[excellent]]")},
            {"id": "b", "trajectory": trajectory("[[poor]]")},
        ],
    }
    async with platform, httpx.AsyncClient(timeout=30) as c:
        gw = platform.urls["gateway"]
        assert (await c.post(f"{gw}/v1/stagewise/score", json=body)).status_code == 401
        ok = await c.post(
            f"{gw}/v1/stagewise/score", json=body, headers={"Authorization": f"Bearer {KEY_A}"}
        )
        assert ok.status_code == 200, ok.text
        qid = ok.json()["question_id"]
        for name in ("store", "verifier", "rubric-generator"):
            r = await c.post(f"{platform.urls[name]}/v1/tasks/stage-scores", json={})
            assert r.status_code == 401, name
        # the buffer landed under the key's tenant, not under "default"
        store = platform.urls["store"]
        mine = await c.get(
            f"{store}/v1/buffers/{qid}",
            headers={"Authorization": f"Bearer {INTERNAL}", "X-Rubricate-Tenant": "team-a"},
        )
        assert mine.status_code == 200
        other = await c.get(
            f"{store}/v1/buffers/{qid}", headers={"Authorization": f"Bearer {INTERNAL}"}
        )
        assert other.status_code == 404


# --- issue 17, item 6: the internal services take the internal credential only


def internal_app(service: str, auth: AuthSettings) -> httpx.AsyncClient:
    router = APIRouter()

    @router.post("/v1/tasks/echo")
    async def echo(tenant: TenantDep = "default") -> dict[str, str]:
        return {"tenant": tenant}

    app = create_service_app(service=service, title="t", routers=[router], auth=auth)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t")


@pytest.mark.parametrize("service", sorted(INTERNAL_SERVICES))
async def test_internal_services_refuse_tenant_keys(service: str) -> None:
    async with internal_app(service, settings()) as c:
        r = await c.post("/v1/tasks/echo", headers={"Authorization": f"Bearer {KEY_A}"})
        assert r.status_code == 403, r.text
        assert r.json()["error"]["type"] == "forbidden"
        assert "gateway" in r.json()["error"]["message"]
        r = await c.post("/v1/tasks/echo", headers={"X-API-Key": KEY_B})
        assert r.status_code == 403
        assert (await c.post("/v1/tasks/echo")).status_code == 401
        r = await c.post("/v1/tasks/echo", headers={"Authorization": "Bearer rk_nope"})
        assert r.status_code == 401
        ok = await c.post(
            "/v1/tasks/echo",
            headers={"Authorization": f"Bearer {INTERNAL}", "X-Rubricate-Tenant": "team-b"},
        )
        assert ok.status_code == 200 and ok.json() == {"tenant": "team-b"}
        assert (await c.get("/healthz")).status_code == 200


async def test_internal_services_in_open_mode_are_unchanged() -> None:
    async with internal_app("store", AuthSettings(mode="open")) as c:
        r = await c.post("/v1/tasks/echo", headers={"X-Rubricate-Tenant": "x1"})
        assert r.status_code == 200 and r.json() == {"tenant": "x1"}


def test_internal_services_need_no_key_table() -> None:
    only_token = AuthSettings(mode="api_key", internal_token=SecretStr(INTERNAL))
    for service in INTERNAL_SERVICES:
        assert_safe_bind(only_token, host="0.0.0.0", service=service)
    with pytest.raises(ValueError, match="API_KEYS"):
        assert_safe_bind(only_token, host="0.0.0.0", service="gateway")


@pytest.mark.parametrize(
    ("token", "why"),
    [
        ("short-token", "11 characters"),
        ("changeme-changeme-changeme", "placeholder"),
        ("REPLACE_ME_WITH_A_RANDOM_TOKEN", "placeholder"),
        ("t" * 32, "distinct"),
        (KEY_A, "API key"),
    ],
    ids=["short", "placeholder", "placeholder-upper", "one-character", "an-api-key"],
)
def test_weak_internal_tokens_are_refused_outside_development(token: str, why: str) -> None:
    weak = AuthSettings(
        mode="api_key",
        api_keys=f"team-a:{hash_key(KEY_A)}",
        internal_token=SecretStr(token),
    )
    with pytest.raises(ValueError, match=why):
        weak.check()
    # development (open mode, loopback only) does not need one
    AuthSettings(mode="open", internal_token=SecretStr(token)).check()


async def test_tenant_keys_cannot_reach_internal_services_of_a_running_platform(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The compose set-up: every service sees the same key table. A tenant's key works on
    the gateway (whose own calls to the store and model servers pass with the internal
    token) and is refused by every internal service."""
    monkeypatch.setenv("RUBRICATE_AUTH_MODE", "api_key")
    monkeypatch.setenv("RUBRICATE_AUTH_API_KEYS", f"team-a:{hash_key(KEY_A)}")
    monkeypatch.setenv("RUBRICATE_AUTH_INTERNAL_TOKEN", INTERNAL)
    platform = EmbeddedPlatform(
        data_dir=tmp_path,
        ports=dict.fromkeys(SERVICES, 0),
        llm=fast_llm(),
        backend=FakeJudgeBackend(),
        gateway=GatewaySettings(upstream_retries=0, grpc_enabled=False),
    )
    body = {
        "question": "q?",
        "rollouts": [
            {"id": "a", "trajectory": trajectory("[[excellent]]")},
            {"id": "b", "trajectory": trajectory("[[poor]]")},
        ],
    }
    key = {"Authorization": f"Bearer {KEY_A}"}
    async with platform, httpx.AsyncClient(timeout=30) as c:
        ok = await c.post(f"{platform.urls['gateway']}/v1/stagewise/score", json=body, headers=key)
        assert ok.status_code == 200, ok.text
        qid = ok.json()["question_id"]
        attempts = {
            "store": ("POST", "/v1/bank/items", {"question": "q?", "text": "x"}),
            "verifier": ("POST", "/v1/tasks/stage-scores", {}),
            "rubric-generator": ("POST", "/v1/tasks/stage-rubrics", {}),
            "miner": ("GET", "/v1/corpora", None),
        }
        for name, (method, path, payload) in attempts.items():
            r = await c.request(method, platform.urls[name] + path, json=payload, headers=key)
            assert r.status_code == 403, (name, r.status_code, r.text)
        read = await c.get(f"{platform.urls['store']}/v1/buffers/{qid}", headers=key)
        assert read.status_code == 403
        internal = {"Authorization": f"Bearer {INTERNAL}", "X-Rubricate-Tenant": "team-a"}
        mine = await c.get(f"{platform.urls['store']}/v1/buffers/{qid}", headers=internal)
        assert mine.status_code == 200
