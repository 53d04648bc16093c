"""Who a change is attributed to (`request_actor`), and the paths that sign their users in
themselves (`own_session_prefixes`: the console)."""

import httpx
from fastapi import APIRouter, Request
from pydantic import SecretStr

from rubricate.common.app import create_service_app
from rubricate.common.auth import (
    ACTOR_HEADER,
    AuthSettings,
    actor_header_value,
    hash_key,
    new_key,
    request_actor,
)

KEY = new_key()
INTERNAL = "internal-" + new_key()


def client(mode: str = "api_key") -> httpx.AsyncClient:
    router = APIRouter()

    @router.get("/v1/actor")
    async def actor(request: Request) -> dict[str, str]:
        return {"actor": request_actor(request)}

    @router.get("/own/page")
    async def own_page() -> dict[str, str]:
        return {"page": "no API key needed here"}

    auth = AuthSettings(
        mode=mode,  # type: ignore[arg-type]
        api_keys=f"team-a:{hash_key(KEY)}",
        internal_token=SecretStr(INTERNAL),
    )
    app = create_service_app(
        service="gateway",
        title="t",
        routers=[router],
        auth=auth,
        own_session_prefixes=("/own",),
    )
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t")


async def test_an_api_key_is_recorded_by_its_fingerprint_and_cannot_name_another() -> None:
    async with client() as c:
        r = await c.get(
            "/v1/actor", headers={"Authorization": f"Bearer {KEY}", ACTOR_HEADER: "the CEO"}
        )
        assert r.json() == {"actor": f"key:{hash_key(KEY)[:12]}"}
        assert KEY not in r.text


async def test_a_service_names_the_actor() -> None:
    async with client() as c:
        auth = {"Authorization": f"Bearer {INTERNAL}"}
        named = await c.get("/v1/actor", headers={**auth, ACTOR_HEADER: "  Ada  via console "})
        assert named.json() == {"actor": "Ada via console"}
        assert (await c.get("/v1/actor", headers=auth)).json() == {"actor": "service"}
        # any name travels percent-encoded (headers are latin-1)
        header = actor_header_value("Zoë 李 via console (key:abc)")
        assert header.isascii()
        r = await c.get("/v1/actor", headers={**auth, ACTOR_HEADER: header})
        assert r.json() == {"actor": "Zoë 李 via console (key:abc)"}


async def test_open_mode_takes_the_header_or_anonymous() -> None:
    async with client("open") as c:
        assert (await c.get("/v1/actor")).json() == {"actor": "anonymous"}
        r = await c.get("/v1/actor", headers={ACTOR_HEADER: "Ada"})
        assert r.json() == {"actor": "Ada"}


async def test_own_session_paths_need_no_api_key_and_nothing_else_is_opened() -> None:
    async with client() as c:
        assert (await c.get("/own/page")).status_code == 200
        assert (await c.get("/v1/actor")).status_code == 401
        assert (await c.get("/ownership")).status_code == 401  # a prefix of a word is no match
