"""Structured logs: one JSON object per line, with the request id of the request being served.

Every service entry point (`rubricate serve ...`, `rubricate store migrate`, the Celery worker
through `rubricate.common.celery_observability`) calls `configure_logging`. A line reads

    {"ts": "2026-11-22T12:00:00.123Z", "level": "info", "logger": "rubricate.store",
     "event": "store.pruned", "message": "store.pruned tenant=default ...",
     "service": "store", "request_id": "3f2a..."}

`event` is the dotted name a message starts with (`store.pruned`), else the logger name.
`request_id` comes from a context variable that `RequestContextMiddleware` sets from the
`X-Request-ID` header (or a new id) for the length of one HTTP request; the gateway's upstream
clients send it on as `X-Request-ID`, and Celery tasks carry it in a message header, so one id
follows a request across services. Fields passed with `extra={...}` are added to the object.
`RUBRICATE_LOG_FORMAT=text` gives human-readable lines instead; `RUBRICATE_LOG_LEVEL` sets the
level of the `rubricate` loggers (default INFO).
"""

import json
import logging
import os
import re
import sys
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any, Literal, TextIO

LogFormat = Literal["json", "text"]

REQUEST_ID: ContextVar[str | None] = ContextVar("rubricate_request_id", default=None)
"""The id of the request (or Celery task's originating request) being handled."""

REQUEST_ID_HEADER = "X-Request-ID"
MAX_REQUEST_ID_CHARS = 128

ACCESS_LOGGER = "rubricate.http"
"""One `http.request` line per request (RequestContextMiddleware). Quiet (WARNING) until
`configure_logging` turns it on, so in-process uses (the demo, tests) stay as they were."""
logging.getLogger(ACCESS_LOGGER).setLevel(logging.WARNING)

_EVENT = re.compile(r"[a-z][a-z0-9_]*(?:\.[a-z0-9_]+)+")
# Attributes every LogRecord has; anything else on a record came from `extra=`.
_RECORD_ATTRS = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "request_id",
    "service",
    "taskName",
    "color_message",  # uvicorn's copy of the message with terminal colours
}
_RESERVED = frozenset({"ts", "level", "logger", "event", "message", "service", "request_id"})


def current_request_id() -> str | None:
    return REQUEST_ID.get()


@contextmanager
def request_id_context(request_id: str | None) -> Iterator[None]:
    """Sets the current request id for the block (and the tasks and threads it starts)."""
    token = REQUEST_ID.set(request_id)
    try:
        yield
    finally:
        REQUEST_ID.reset(token)


def forward_headers(headers: dict[str, str] | None = None) -> dict[str, str]:
    """`headers` plus X-Request-ID of the current request, unless they carry one already."""
    out = dict(headers or {})
    rid = REQUEST_ID.get()
    if rid and not any(k.lower() == "x-request-id" for k in out):
        out[REQUEST_ID_HEADER] = rid
    return out


def event_name(record: logging.LogRecord) -> str:
    """The dotted event name a log message starts with, else the logger's name."""
    template = record.msg if isinstance(record.msg, str) else ""
    first = template.split(" ", 1)[0].rstrip(":")
    return first if _EVENT.fullmatch(first) else record.name


class RequestIdFilter(logging.Filter):
    """Stamps each record with the current request id and the service name."""

    def __init__(self, service: str) -> None:
        super().__init__()
        self.service = service

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "request_id", None) is None:
            record.request_id = REQUEST_ID.get()
        if getattr(record, "service", None) is None:
            record.service = self.service
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per record: ts, level, logger, event, message, service, request_id."""

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        body: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC)
            .isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": event_name(record),
            "message": message,
            "service": getattr(record, "service", None),
            "request_id": getattr(record, "request_id", None),
        }
        for key, value in vars(record).items():
            if key not in _RECORD_ATTRS and key not in _RESERVED and not key.startswith("_"):
                body[key] = value
        if record.exc_info:
            body["exc_type"] = record.exc_info[0].__name__ if record.exc_info[0] else None
            body["exc"] = "".join(traceback.format_exception(*record.exc_info)).rstrip()
        elif record.exc_text:
            body["exc"] = record.exc_text
        return json.dumps(body, default=str, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s")


def configure_logging(
    *,
    service: str,
    level: str | None = None,
    fmt: LogFormat | None = None,
    stream: TextIO | None = None,
) -> logging.Handler:
    """Route every logger (uvicorn's and Celery's included) to one handler on `stream`.

    Replaces the root logger's handlers; uvicorn's own loggers propagate to it (run uvicorn
    with `log_config=None`). Returns the handler.
    """
    chosen = fmt or os.environ.get("RUBRICATE_LOG_FORMAT", "json").lower()
    if chosen not in ("json", "text"):
        raise ValueError(f"RUBRICATE_LOG_FORMAT must be json or text, not {chosen!r}")
    level_name = (level or os.environ.get("RUBRICATE_LOG_LEVEL", "INFO")).upper()
    if not isinstance(logging.getLevelName(level_name), int):
        raise ValueError(f"unknown log level {level_name!r}")
    handler = logging.StreamHandler(stream or sys.stdout)
    handler.addFilter(RequestIdFilter(service))
    handler.setFormatter(JsonFormatter() if chosen == "json" else TextFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    logging.getLogger("rubricate").setLevel(level_name)
    logging.getLogger(ACCESS_LOGGER).setLevel(logging.NOTSET)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access", "celery"):
        logger = logging.getLogger(name)
        logger.handlers.clear()
        logger.propagate = True
        logger.setLevel(logging.INFO)
    return handler
