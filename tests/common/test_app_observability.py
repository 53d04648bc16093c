"""The service app kit's observability: the access line per request and a /metrics endpoint
that does not hold up other requests while a collector reads slowly (e.g. the broker)."""

import asyncio
import logging
import time
from collections.abc import Iterator

import httpx
import pytest
from fastapi import APIRouter
from prometheus_client import REGISTRY
from prometheus_client.core import GaugeMetricFamily

from rubricate.common.app import create_service_app
from rubricate.common.auth import AuthSettings
from rubricate.common.logging import ACCESS_LOGGER


class SlowCollector:
    """Stands in for a collector that does blocking I/O at scrape time."""

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s

    def collect(self) -> Iterator[GaugeMetricFamily]:
        time.sleep(self.delay_s)
        yield GaugeMetricFamily("rubricate_test_slow", "A test gauge.", value=1)


@pytest.fixture
def slow_collector() -> Iterator[SlowCollector]:
    collector = SlowCollector(2.0)
    REGISTRY.register(collector)
    yield collector
    REGISTRY.unregister(collector)


def _app() -> httpx.AsyncClient:
    router = APIRouter()

    @router.get("/v1/things/{thing_id}")
    async def thing(thing_id: str) -> dict[str, str]:
        return {"id": thing_id}

    app = create_service_app(
        service="svc", title="t", routers=[router], auth=AuthSettings(mode="open")
    )
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t")


async def test_metrics_scrape_does_not_block_other_requests(slow_collector: SlowCollector) -> None:
    """The scrape runs in a thread: a health check sent while the collector reads finishes
    first (with the scrape on the event loop it could not even start until the scrape ended)."""
    finished: list[str] = []

    async def get(client: httpx.AsyncClient, path: str) -> httpx.Response:
        response = await client.get(path)
        finished.append(path)
        return response

    async with _app() as client:
        scrape = asyncio.create_task(get(client, "/metrics"))
        await asyncio.sleep(0.05)  # the scrape is inside the slow collector now
        health = await get(client, "/healthz")
        response = await scrape
    assert health.status_code == 200
    assert finished == ["/healthz", "/metrics"]
    assert "rubricate_test_slow 1.0" in response.text


async def test_one_access_line_per_request_with_route_template_and_id(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger=ACCESS_LOGGER)
    async with _app() as client:
        response = await client.get("/v1/things/42", headers={"X-Request-ID": "rid-9"})
        await client.get("/healthz")
    assert response.headers["x-request-id"] == "rid-9"
    lines = [r for r in caplog.records if r.name == ACCESS_LOGGER]
    assert [(r.levelno, r.route, r.status, r.service) for r in lines] == [  # type: ignore[attr-defined]
        (logging.INFO, "/v1/things/{thing_id}", 200, "svc"),
        (logging.DEBUG, "/healthz", 200, "svc"),  # probes only at debug
    ]
