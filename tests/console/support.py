"""Signing in to the console with plain HTTP, and reading what its pages hold."""

import re
from urllib.parse import urlsplit

import httpx

CSRF_RE = re.compile(r'name="csrf" value="([^"]+)"')


def origin(base_url: str) -> str:
    parts = urlsplit(base_url)
    return f"{parts.scheme}://{parts.netloc}"


def browser(gateway: str) -> httpx.AsyncClient:
    """A client that behaves as the console's own pages do: same-origin headers."""
    return httpx.AsyncClient(
        base_url=gateway, timeout=60, follow_redirects=False, headers={"Origin": origin(gateway)}
    )


async def sign_in(client: httpx.AsyncClient, key: str, name: str = "") -> httpx.Response:
    r = await client.post("/console/login", data={"key": key, "name": name})
    return r


async def csrf_of(client: httpx.AsyncClient, path: str = "/console/questions") -> str:
    page = await client.get(path)
    assert page.status_code == 200, page.text
    match = CSRF_RE.search(page.text)
    assert match, "no CSRF token on the page"
    return match.group(1)
