"""A real Celery worker (in a thread, solo pool) on the Redis broker, with the hooks of
rubricate.common.celery_observability: the request id of the publishing request reaches the
task and its JSON log lines, job durations are recorded per task and outcome, and the queue
depth is read from the broker."""

import json
import logging
import os
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest
import redis
from celery import Celery
from celery.contrib.testing.worker import start_worker
from prometheus_client import REGISTRY

from rubricate.common.celery_observability import (
    _worker_ready,
    clear_stale_multiprocess_files,
    install,
    job_outcome,
    metrics_registry,
    task_request_id,
)
from rubricate.common.logging import current_request_id, request_id_context
from rubricate.common.queue_metrics import priority_keys

BROKER_URL = os.environ.get("RUBRICATE_TEST_BROKER_URL", "redis://127.0.0.1:6379/13")

log = logging.getLogger("rubricate.test.worker")


@pytest.fixture
def restore_logging() -> Iterator[None]:
    """The worker's set-up replaces the root logger's handlers: put them back."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    rubricate_level = logging.getLogger("rubricate").level
    try:
        yield
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in handlers:
            root.addHandler(handler)
        root.setLevel(level)
        logging.getLogger("rubricate").setLevel(rubricate_level)


@pytest.fixture
def app() -> Iterator[Celery]:
    queue = f"test-miner-{uuid.uuid4().hex[:8]}"
    client = redis.Redis.from_url(BROKER_URL)
    try:
        client.ping()
    except redis.RedisError as exc:
        pytest.fail(f"Redis is not reachable at {BROKER_URL}: {exc}", pytrace=False)
    celery = Celery("rubricate-test-worker", broker=BROKER_URL, set_as_current=False)
    celery.conf.update(
        task_default_queue=queue,
        task_ignore_result=True,
        worker_hijack_root_logger=False,
        broker_connection_retry_on_startup=True,
        worker_prefetch_multiplier=1,
    )
    install(celery)
    yield celery
    client.delete(*priority_keys(queue))
    client.close()


def _count(task: str, outcome: str) -> float:
    value = REGISTRY.get_sample_value(
        "rubricate_job_duration_seconds_count", {"task": task, "outcome": outcome}
    )
    return value or 0.0


def test_outcomes_and_header_reading() -> None:
    assert [job_outcome(s) for s in ("SUCCESS", "RETRY", "FAILURE", "REVOKED", None)] == [
        "success",
        "retry",
        "failure",
        "failure",
        "failure",
    ]
    assert task_request_id(SimpleNamespace(rubricate_request_id="a")) == "a"
    assert task_request_id(SimpleNamespace(headers={"rubricate_request_id": "b"})) == "b"
    assert task_request_id(SimpleNamespace(headers=None)) is None


def test_worker_carries_request_ids_and_records_jobs(
    app: Celery, restore_logging: None, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: dict[str, str | None] = {}

    @app.task(name="rubricate.test.record")
    def record(key: str) -> None:
        seen[key] = current_request_id()
        log.info("test.task_ran key=%s", key)

    @app.task(name="rubricate.test.fail")
    def fail() -> None:
        raise RuntimeError("mining failed")

    before = (_count(record.name, "success"), _count(fail.name, "failure"))
    with request_id_context("req-from-gateway"):
        record.delay("with-id")
    record.delay("without-id")
    fail.delay()
    queue = app.conf.task_default_queue
    registry = metrics_registry(app)
    assert registry.get_sample_value("rubricate_queue_depth", {"queue": queue}) == 3
    assert registry.get_sample_value("rubricate_queue_broker_up") == 1

    with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=30):
        deadline = time.monotonic() + 20
        while _count(fail.name, "failure") < before[1] + 1 or len(seen) < 2:
            assert time.monotonic() < deadline, f"tasks not run: {seen}"
            time.sleep(0.05)

    assert seen == {"with-id": "req-from-gateway", "without-id": None}
    assert _count(record.name, "success") == before[0] + 2
    assert _count(fail.name, "failure") == before[1] + 1
    assert registry.get_sample_value("rubricate_queue_depth", {"queue": queue}) == 0
    assert current_request_id() is None, "the task's request id does not outlive it"
    # the worker logs JSON lines (its logging set-up is ours), the task's with the id
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines() if x.startswith("{")]
    ran = {line["message"]: line for line in lines if line["event"] == "test.task_ran"}
    assert ran["test.task_ran key=with-id"]["request_id"] == "req-from-gateway"
    assert ran["test.task_ran key=with-id"]["service"] == "miner-worker"
    assert ran["test.task_ran key=without-id"]["request_id"] is None


def test_eager_tasks_keep_the_request_id_of_the_request_running_them(app: Celery) -> None:
    app.conf.task_always_eager = True
    seen: list[str | None] = []

    @app.task(name="rubricate.test.eager")
    def eager() -> None:
        seen.append(current_request_id())

    with request_id_context("req-eager"):
        eager.delay()
        assert current_request_id() == "req-eager"
    eager.delay()
    assert seen == ["req-eager", None]
    assert _count(eager.name, "success") >= 2


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def test_worker_ready_serves_metrics_with_the_queue_depth(
    app: Celery, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = _free_port()
    monkeypatch.setenv("RUBRICATE_WORKER_METRICS_PORT", str(port))
    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR", raising=False)
    _worker_ready(sender=SimpleNamespace(app=app))
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    queue = app.conf.task_default_queue
    assert f'rubricate_queue_depth{{queue="{queue}"}} 0.0' in text
    assert "rubricate_job_duration_seconds" in text


def test_stale_multiprocess_files_are_removed(tmp_path: Path) -> None:
    for name in ("counter_11.db", "histogram_11.db", "counter_22.db", "gauge_all_22.db"):
        (tmp_path / name).write_bytes(b"")
    assert clear_stale_multiprocess_files(tmp_path, keep_pid=22) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["counter_22.db", "gauge_all_22.db"]
