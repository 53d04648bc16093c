"""The console in a real browser: headless Chromium from the distribution's packages, driven
by Playwright. A person signs in, browses a question, retires a rubric and approves a bank
item; the test checks each effect through the public API. A wrong key and a second tenant see
nothing of the first. Screenshots of every page are kept as test artifacts
(RUBRICATE_TEST_ARTIFACTS, default test-artifacts/console)."""

import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.console.conftest import Console

CHROMIUM = os.environ.get("RUBRICATE_CHROMIUM", "/usr/bin/chromium")
REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("RUBRICATE_TEST_ARTIFACTS", REPO / "test-artifacts")) / "console"

try:
    from playwright.async_api import Browser, Page, async_playwright
except ImportError:  # pragma: no cover - the dev extra installs it
    async_playwright = None  # type: ignore[assignment]


def _missing() -> str | None:
    if async_playwright is None:
        return "playwright is not installed (the dev extra)"
    if shutil.which(CHROMIUM) is None and not Path(CHROMIUM).exists():
        return f"no Chromium at {CHROMIUM} (make test installs Debian's chromium)"
    return None


@pytest.fixture
async def chromium() -> AsyncIterator["Browser"]:
    missing = _missing()
    if missing:
        if os.environ.get("RUBRICATE_REQUIRE_BROWSER") == "1":
            pytest.fail(missing, pytrace=False)
        pytest.skip(missing)
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=["--no-sandbox"]
        )
        try:
            yield browser
        finally:
            await browser.close()


async def shot(page: "Page", name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


async def sign_in(page: "Page", gateway: str, key: str, name: str = "") -> None:
    await page.goto(f"{gateway}/console/questions")
    assert "/console/login" in page.url  # nothing without signing in
    await page.fill("input[name=key]", key)
    if name:
        await page.fill("input[name=name]", name)
    await page.click("button[type=submit]")


async def test_a_person_curates_rubrics_and_the_bank_in_chromium(
    console: Console, chromium: "Browser"
) -> None:
    api = console.api[console.tenant_a]
    q = quote(console.question_id, safe="")
    context = await chromium.new_context(viewport={"width": 1400, "height": 900})
    page = await context.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)

    await page.goto(f"{console.gateway}/console/login")
    await shot(page, "01-sign-in")
    await sign_in(page, console.gateway, console.keys[console.tenant_a], "Ada Lovelace")
    await page.wait_for_url("**/console/questions")
    assert await page.locator(f"text={console.question_id}").count() == 1
    await shot(page, "02-questions")

    # search narrows the list (htmx swaps the table in place)
    await page.fill("input[name=search]", "no such question at all")
    await page.wait_for_selector("text=No questions match")
    await page.fill("input[name=search]", "Mars")
    await page.wait_for_selector(f"a.qid:has-text('{console.question_id}')")

    await page.click(f"a.qid:has-text('{console.question_id}')")
    await page.wait_for_url(f"**/console/questions/{q}")
    await page.wait_for_selector("#scoring .rollout")
    # the trajectory's <script> is text: it did not run, and it is shown
    assert await page.title() != "owned"
    assert await page.locator("pre.trajectory", has_text="<script>").count() >= 1
    assert await page.locator("pre.trajectory mark.stage-answer").count() >= 1
    await shot(page, "03-question")

    # retire the first live rubric, with a reason
    buffer = (await api.get(f"/v1/buffers/{q}")).json()
    rubric = next(r for rs in buffer["rubrics"].values() for r in rs)
    row = page.locator(f"tr[data-rubric-id='{rubric['id']}']")
    await row.locator("summary", has_text="Retire").click()
    await row.locator("input[name=reason]").first.fill("too vague to score")
    await row.locator("button", has_text="Retire this rubric").click()
    await page.wait_for_selector("text=Rubric retire: done.")
    await shot(page, "04-rubric-retired")
    after = (await api.get(f"/v1/buffers/{q}")).json()
    assert rubric["id"] not in [r["id"] for rs in after["rubrics"].values() for r in rs]
    history = (await api.get(f"/v1/buffers/{q}/history")).json()["rubrics"]
    entry = next(e for e in history if e["id"] == rubric["id"])
    assert entry["retired_by"].startswith("Ada Lovelace via console (key:")

    # approve the bank item
    await page.click("nav >> text=Bank")
    await page.wait_for_url("**/console/bank")
    item = page.locator(f"article[data-question-hash='{console.question_hash}']")
    await item.locator("button", has_text="Approve").click()
    await page.wait_for_selector("text=Bank item approve: done.")
    await shot(page, "05-bank")
    versions = (await api.get(f"/v1/bank/items/{console.question_hash}/history")).json()
    last = versions["versions"][-1]
    assert last["status"] == "approved" and last["action"] == "approve"
    assert last["author"].startswith("Ada Lovelace via console (key:")

    for name, path in (("06-audit", "/console/audit"), ("07-jobs", "/console/jobs")):
        await page.goto(f"{console.gateway}{path}")
        await page.wait_for_selector("h1")
        await shot(page, name)
    await page.goto(f"{console.gateway}/console/bank/{console.question_hash}")
    await shot(page, "08-bank-item-history")
    assert not [e for e in errors if "Content Security Policy" in e], errors
    await context.close()


async def test_a_wrong_key_and_another_tenant_see_nothing(
    console: Console, chromium: "Browser"
) -> None:
    context = await chromium.new_context()
    page = await context.new_page()
    await sign_in(page, console.gateway, "rk_" + "z" * 43)
    await page.wait_for_selector("text=Unknown API key")
    await page.goto(f"{console.gateway}/console/questions")
    assert "/console/login" in page.url
    await shot(page, "09-wrong-key")

    await sign_in(page, console.gateway, console.keys[console.tenant_b], "Bob")
    await page.wait_for_url("**/console/questions")
    assert await page.locator("text=What does tenant B ask?").count() == 1
    assert await page.locator(f"text={console.question_id}").count() == 0
    await page.goto(f"{console.gateway}/console/questions/{quote(console.question_id, safe='')}")
    assert await page.locator("h1", has_text="Error 404").count() == 1
    await page.goto(f"{console.gateway}/console/bank")
    assert await page.locator("text=Mars Climate Orbiter").count() == 0
    await shot(page, "10-second-tenant")
    await context.close()
