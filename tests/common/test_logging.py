"""JSON log lines, request ids in a context variable, and header forwarding."""

import asyncio
import io
import json
import logging
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from rubricate.common.logging import (
    REQUEST_ID,
    JsonFormatter,
    RequestIdFilter,
    configure_logging,
    current_request_id,
    event_name,
    forward_headers,
    request_id_context,
)


@pytest.fixture
def restore_logging() -> Iterator[None]:
    """configure_logging replaces the root logger's handlers: put them back afterwards."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    names = ("rubricate", "rubricate.http", "uvicorn", "uvicorn.error", "uvicorn.access", "celery")
    saved = {n: (logging.getLogger(n).level, logging.getLogger(n).propagate) for n in names}
    try:
        yield
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in handlers:
            root.addHandler(handler)
        root.setLevel(level)
        for n, (lvl, propagate) in saved.items():
            logging.getLogger(n).setLevel(lvl)
            logging.getLogger(n).propagate = propagate


def _record(msg: str, *args: Any, **extra: Any) -> logging.LogRecord:
    record = logging.LogRecord("rubricate.store", logging.INFO, __file__, 1, msg, args, None)
    for key, value in extra.items():
        setattr(record, key, value)
    return record


def _format(record: logging.LogRecord, service: str = "store") -> dict[str, Any]:
    RequestIdFilter(service).filter(record)
    out: dict[str, Any] = json.loads(JsonFormatter().format(record))
    return out


def test_json_line_fields() -> None:
    with request_id_context("req-1"):
        line = _format(_record("store.pruned tenant=%s ids=%s", "t1", ["a"], group_id="g9"))
    assert line["event"] == "store.pruned"
    assert line["message"] == "store.pruned tenant=t1 ids=['a']"
    assert line["level"] == "info" and line["logger"] == "rubricate.store"
    assert line["service"] == "store" and line["request_id"] == "req-1"
    assert line["group_id"] == "g9", "extra= fields are kept"
    assert line["ts"].endswith("Z") and "T" in line["ts"]
    outside = _format(_record("store.started", color_message="\x1b[36mstore.started\x1b[0m"))
    assert outside["request_id"] is None
    assert "color_message" not in outside, "uvicorn's coloured copy is dropped"


def test_event_is_the_dotted_name_or_the_logger() -> None:
    assert event_name(_record("gateway.scored group=%s", "g")) == "gateway.scored"
    assert event_name(_record("store.cache_unavailable: retrying")) == "store.cache_unavailable"
    assert event_name(_record("Started server process [%d]", 1)) == "rubricate.store"
    assert event_name(_record("ok.")) == "rubricate.store"


def test_exceptions_are_one_json_field() -> None:
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        record = logging.LogRecord(
            "rubricate.x", logging.ERROR, __file__, 1, "x.failed", (), sys.exc_info()
        )
    line = _format(record)
    assert line["exc_type"] == "RuntimeError" and "boom" in line["exc"]
    assert line["level"] == "error"


def test_a_record_keeps_the_service_that_logged_it() -> None:
    line = _format(_record("http.request", service="verifier"), service="gateway")
    assert line["service"] == "verifier"


async def test_request_ids_are_per_task_and_reach_threads() -> None:
    async def handle(rid: str) -> tuple[str | None, str | None]:
        with request_id_context(rid):
            await asyncio.sleep(0.01)
            in_thread = await asyncio.to_thread(current_request_id)
            return current_request_id(), in_thread

    results = await asyncio.gather(handle("a"), handle("b"))
    assert results == [("a", "a"), ("b", "b")]
    assert current_request_id() is None


def test_forward_headers_adds_the_current_id_once() -> None:
    assert forward_headers({"X-Tenant": "t"}) == {"X-Tenant": "t"}
    with request_id_context("rid-7"):
        assert forward_headers({"X-Tenant": "t"}) == {"X-Tenant": "t", "X-Request-ID": "rid-7"}
        assert forward_headers(None) == {"X-Request-ID": "rid-7"}
        # an explicit id (any case) is left alone
        assert forward_headers({"x-request-id": "mine"}) == {"x-request-id": "mine"}
    assert REQUEST_ID.get() is None


def test_configure_logging_routes_every_logger_to_one_json_handler(
    restore_logging: None,
) -> None:
    stream = io.StringIO()
    configure_logging(service="gateway", level="DEBUG", fmt="json", stream=stream)
    with request_id_context("r-1"):
        logging.getLogger("rubricate.gateway").debug("gateway.debugged n=%d", 1)
        logging.getLogger("uvicorn.error").info("Application startup complete.")
        logging.getLogger("rubricate.http").info("http.request status=%d", 200)
    logging.getLogger("some.library").info("not shown: libraries log warnings and up")
    lines = [json.loads(x) for x in stream.getvalue().splitlines()]
    assert [(x["logger"], x["event"]) for x in lines] == [
        ("rubricate.gateway", "gateway.debugged"),
        ("uvicorn.error", "uvicorn.error"),
        ("rubricate.http", "http.request"),
    ]
    assert {x["request_id"] for x in lines} == {"r-1"}
    assert {x["service"] for x in lines} == {"gateway"}


def test_configure_logging_text_format_and_bad_settings(
    restore_logging: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    stream = io.StringIO()
    monkeypatch.setenv("RUBRICATE_LOG_FORMAT", "text")
    configure_logging(service="store", stream=stream)
    with request_id_context("r-2"):
        logging.getLogger("rubricate.store").info("store.started")
    assert "INFO rubricate.store [r-2] store.started" in stream.getvalue()
    monkeypatch.setenv("RUBRICATE_LOG_FORMAT", "xml")
    with pytest.raises(ValueError, match="json or text"):
        configure_logging(service="store", stream=stream)
    with pytest.raises(ValueError, match="unknown log level"):
        configure_logging(service="store", level="LOUD", fmt="json", stream=stream)
