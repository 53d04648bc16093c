"""A request id set at the gateway follows the request into the upstream services' logs.

Every service runs for real (embedded mode: separate uvicorn servers talking HTTP), so the
only way the id reaches the store's or the verifier's log lines is the X-Request-ID header
the gateway's upstream clients send: each server handles a request in its own context.
"""

import io
import json
import logging
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from rubricate.common.logging import ACCESS_LOGGER, JsonFormatter, RequestIdFilter
from tests.support.gateway import Running, trajectory


@pytest.fixture
def json_log() -> Iterator[io.StringIO]:
    """The services' log lines, formatted as in production, in a buffer."""
    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    handler.addFilter(RequestIdFilter("test"))
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger("rubricate")
    access = logging.getLogger(ACCESS_LOGGER)
    old_levels = root.level, access.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    access.setLevel(logging.NOTSET)
    try:
        yield buffer
    finally:
        root.removeHandler(handler)
        root.setLevel(old_levels[0])
        access.setLevel(old_levels[1])


def _lines(buffer: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in buffer.getvalue().splitlines() if line.strip()]


async def test_gateway_request_id_appears_in_upstream_log_records(
    running: Running, json_log: io.StringIO
) -> None:
    rid = f"trainer-step-7-{uuid.uuid4().hex[:8]}"
    body = {
        "question": "Why was the Mars Climate Orbiter lost?",
        "rollouts": [{"id": f"r{i}", "trajectory": trajectory(m)} for i, m in enumerate("ab")],
    }
    response = await running.client.post(
        "/v1/stagewise/score", json=body, headers={"X-Request-ID": rid}
    )
    assert response.status_code == 200, response.text
    assert response.headers["x-request-id"] == rid

    lines = _lines(json_log)
    for line in lines:
        assert {"ts", "level", "logger", "event", "message", "service", "request_id"} <= set(line)
        assert line["ts"].endswith("Z")
    access = [line for line in lines if line["event"] == "http.request"]
    by_service: dict[str, set[str]] = {}
    for line in access:
        by_service.setdefault(line["service"], set()).add(line["request_id"])
    # the gateway's own line, and one from each upstream it called, all under the same id
    assert by_service["gateway"] == {rid}
    for upstream in ("store", "rubric-generator", "verifier"):
        assert by_service.get(upstream) == {rid}, (upstream, by_service)
    routes = {(line["service"], line["route"]) for line in access}
    assert ("verifier", "/v1/tasks/stage-scores/group") in routes  # one call per group
    assert ("store", "/v1/buffers/{question_id}") in routes


async def test_requests_without_an_id_get_a_fresh_one_each(
    running: Running, json_log: io.StringIO
) -> None:
    store = running.platform.urls["store"]
    first = await running.client.get(f"{store}/v1/buffers/{'0' * 64}")
    second = await running.client.get(f"{store}/v1/buffers/{'0' * 64}")
    ids = [first.headers["x-request-id"], second.headers["x-request-id"]]
    assert ids[0] != ids[1] and all(len(i) == 32 for i in ids)
    logged = [line["request_id"] for line in _lines(json_log) if line["event"] == "http.request"]
    assert logged == ids
    # outside a request no id lingers in the context
    logging.getLogger("rubricate.test").info("test.after_requests")
    assert _lines(json_log)[-1]["request_id"] is None
