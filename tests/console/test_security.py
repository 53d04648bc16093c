"""The console's security, over plain HTTP against a real gateway in API-key mode: nothing
without signing in, the cookie's flags, CSRF and origin checks on every change, no tenant
crossing, and rubric, question and trajectory text shown as text."""

from urllib.parse import quote

import httpx

from tests.console.conftest import Console
from tests.console.support import browser, csrf_of, sign_in

PAGES = ["/console/questions", "/console/bank", "/console/audit", "/console/jobs"]


async def live_rubric_ids(api: httpx.AsyncClient, question_id: str) -> list[str]:
    r = await api.get(f"/v1/buffers/{quote(question_id, safe='')}")
    assert r.status_code == 200, r.text
    return [x["id"] for rubrics in r.json()["rubrics"].values() for x in rubrics]


async def test_nothing_is_readable_without_signing_in(console: Console) -> None:
    async with browser(console.gateway) as b:
        for path in [*PAGES, f"/console/questions/{quote(console.question_id, safe='')}"]:
            r = await b.get(path)
            assert r.status_code == 303, (path, r.status_code)
            assert r.headers["location"].startswith("/console/login?next=")
            assert console.question_id not in r.text
        # htmx asks for a fragment: told to go to the sign-in page instead
        r = await b.get("/console/questions", headers={"HX-Request": "true"})
        assert r.headers["hx-redirect"].startswith("/console/login")
        # a forged cookie is no session
        b.cookies.set("rubricate_console", "e30.forged", path="/console")
        r = await b.get("/console/questions")
        assert r.status_code == 303


async def test_a_wrong_key_signs_nobody_in(console: Console) -> None:
    async with browser(console.gateway) as b:
        r = await sign_in(b, "rk_" + "x" * 43)
        assert r.status_code == 401 and "Unknown API key" in r.text
        assert "set-cookie" not in r.headers
        assert (await b.get("/console/questions")).status_code == 303


async def test_the_session_cookie_is_httponly_strict_and_holds_no_key(console: Console) -> None:
    key = console.keys[console.tenant_a]
    async with browser(console.gateway) as b:
        r = await sign_in(b, key, "Ada")
        assert r.status_code == 303 and r.headers["location"] == "/console/questions"
        cookie = r.headers["set-cookie"]
        flags = {part.strip().split("=")[0].lower() for part in cookie.split(";")}
        assert {"httponly", "samesite", "path", "max-age"} <= flags
        assert "samesite=strict" in cookie.lower() and "path=/console" in cookie.lower()
        assert "secure" not in flags  # plain HTTP here
        assert key not in cookie
        page = await b.get("/console/questions")
        assert page.status_code == 200 and console.tenant_a in page.text
        csp = page.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
    async with browser(console.gateway) as b:  # behind a TLS proxy the cookie is Secure
        r = await b.post(
            "/console/login", data={"key": key}, headers={"X-Forwarded-Proto": "https"}
        )
        assert r.status_code == 303
        assert "secure" in {p.strip().lower() for p in r.headers["set-cookie"].split(";")}


async def test_signing_in_needs_the_consoles_own_origin(console: Console) -> None:
    async with httpx.AsyncClient(base_url=console.gateway) as b:
        r = await b.post(
            "/console/login",
            data={"key": console.keys[console.tenant_a]},
            headers={"Origin": "http://evil.example"},
        )
        assert r.status_code == 403 and "set-cookie" not in r.headers


async def test_changes_need_the_csrf_token_and_the_origin(console: Console) -> None:
    api = console.api[console.tenant_a]
    rubric = (await live_rubric_ids(api, console.question_id))[0]
    action = f"/console/questions/{quote(console.question_id, safe='')}/rubrics/{rubric}"
    async with browser(console.gateway) as a, browser(console.gateway) as other:
        await sign_in(a, console.keys[console.tenant_a], "Ada Løvelace 李")
        await sign_in(other, console.keys[console.tenant_a], "Eve")
        token = await csrf_of(a)
        other_token = await csrf_of(other)
        refused = [
            await a.post(action, data={"action": "retire"}),  # no token
            await a.post(action, data={"action": "retire", "csrf": "x" * 43}),
            await a.post(action, data={"action": "retire", "csrf": other_token}),
            await a.post(  # the right token, from another site
                action,
                data={"action": "retire", "csrf": token},
                headers={"Origin": "http://evil.example"},
            ),
        ]
        assert [r.status_code for r in refused] == [403, 403, 403, 403]
        assert rubric in await live_rubric_ids(api, console.question_id)
        r = await a.post(action, data={"action": "retire", "csrf": token, "reason": "vague"})
        assert r.status_code == 303, r.text
        assert rubric not in await live_rubric_ids(api, console.question_id)
        events = await api.get(f"/v1/buffers/{quote(console.question_id, safe='')}/curations")
        (event,) = events.json()["events"]
        assert event["action"] == "retire" and event["reason"] == "vague"
        assert event["author"].startswith("Ada Løvelace 李 via console (key:")


async def test_a_second_tenant_sees_and_changes_nothing_of_the_first(console: Console) -> None:
    api_a = console.api[console.tenant_a]
    rubric = (await live_rubric_ids(api_a, console.question_id))[0]
    q = quote(console.question_id, safe="")
    async with browser(console.gateway) as b:
        await sign_in(b, console.keys[console.tenant_b], "Bob")
        listing = await b.get("/console/questions")
        assert listing.status_code == 200
        assert console.question_id not in listing.text and "What does tenant B ask?" in listing.text
        assert (await b.get(f"/console/questions/{q}")).status_code == 404
        bank = await b.get("/console/bank")
        assert console.question_hash not in bank.text and "Mars" not in bank.text
        assert (await b.get(f"/console/bank/{console.question_hash}")).status_code == 404
        token = await csrf_of(b)
        r = await b.post(
            f"/console/questions/{q}/rubrics/{rubric}", data={"action": "retire", "csrf": token}
        )
        assert r.status_code == 404
        r = await b.post(
            f"/console/bank/{console.question_hash}", data={"action": "retire", "csrf": token}
        )
        assert r.status_code == 404
    assert rubric in await live_rubric_ids(api_a, console.question_id)
    item = await api_a.get(f"/v1/bank/items/{console.question_hash}/history")
    assert item.json()["versions"][-1]["status"] == "pending"


async def test_text_from_trajectories_questions_and_rubrics_is_shown_as_text(
    console: Console,
) -> None:
    api = console.api[console.tenant_a]
    rubric = (await live_rubric_ids(api, console.question_id))[0]
    r = await api.post(
        f"/v1/buffers/{quote(console.question_id, safe='')}/rubrics/{rubric}/curate",
        json={
            "action": "edit",
            "edit": {"title": "<img src=x onerror=alert(1)>", "description": "d</td><script>x"},
        },
    )
    assert r.status_code == 200, r.text
    async with browser(console.gateway) as b:
        await sign_in(b, console.keys[console.tenant_a])
        page = await b.get(
            f"/console/questions/{quote(console.question_id, safe='')}"
            f"?scoring={console.scoring_ids[0]}"
        )
        assert page.status_code == 200
        html = page.text
        assert "&lt;script&gt;document.title=&#34;owned&#34;&lt;/script&gt;" in html
        assert "<script>document.title" not in html
        assert "&lt;img src=x onerror=alert(1)&gt;" in html and "<img src=x" not in html
        assert "&lt;b&gt;units&lt;/b&gt;" in html and "<b>units</b>" not in html
        assert html.count("<script") == 1  # htmx, from the console's own origin


async def test_every_page_renders_for_a_signed_in_tenant(console: Console) -> None:
    async with browser(console.gateway) as b:
        await sign_in(b, console.keys[console.tenant_a])
        for path in PAGES:
            r = await b.get(path)
            assert r.status_code == 200, (path, r.text)
            assert "Sign out" in r.text
