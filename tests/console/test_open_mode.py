"""Open mode (no API keys, loopback only; `make serve`): the console still asks who is looking
(the tenant) before it shows anything, and records the name given with every change."""

import httpx
import pytest

from rubricate.gateway.app import create_app


@pytest.fixture
async def gateway(monkeypatch: pytest.MonkeyPatch) -> httpx.AsyncClient:
    monkeypatch.setenv("RUBRICATE_AUTH_MODE", "open")
    app = create_app()
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),
        base_url="http://gw",
        headers={"Origin": "http://gw"},
    )


async def test_open_mode_signs_in_with_a_tenant_name(gateway: httpx.AsyncClient) -> None:
    async with gateway as c:
        page = await c.get("/console/login")
        assert 'name="tenant"' in page.text and 'name="key"' not in page.text
        assert (await c.get("/console/questions")).status_code == 303
        bad = await c.post("/console/login", data={"tenant": "no spaces/allowed"})
        assert bad.status_code == 400 and "set-cookie" not in bad.headers
        ok = await c.post("/console/login", data={"tenant": "team-x", "name": "Ada"})
        assert ok.status_code == 303 and "httponly" in ok.headers["set-cookie"].lower()
        assert ok.headers["location"] == "/console/questions"


async def test_the_next_page_stays_on_the_console(gateway: httpx.AsyncClient) -> None:
    async with gateway as c:
        for target, expected in (
            ("/console/bank", "/console/bank"),
            ("https://evil.example/", "/console/questions"),
            ("//evil.example/console/x", "/console/questions"),
        ):
            r = await c.post("/console/login", data={"tenant": "t", "next": target})
            assert r.headers["location"] == expected, target
