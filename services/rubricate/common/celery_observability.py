"""Logs, request ids and metrics for a Celery worker: call `install(app)` where the Celery app
is defined (`rubricate.miner.celery_app`).

- Logging: JSON lines through `configure_logging` instead of Celery's own set-up.
- Request ids: a task published while a request is served carries the request's id in a
  message header; the worker sets it as the current request id while the task runs, so the
  task's log lines carry the id of the HTTP request that started the job.
- Metrics: `rubricate_job_duration_seconds{task,outcome}` per task run, and the queue depth of
  the app's queues (`rubricate_queue_depth{queue}`, read from the Redis broker at scrape
  time), served on `RUBRICATE_WORKER_METRICS_PORT` (default 9808; 0 turns it off). With the
  prefork pool tasks run in child processes: set `PROMETHEUS_MULTIPROC_DIR` to a writable
  directory (the deployment files do) so the children's metrics are aggregated; stale files
  of earlier runs there are removed when the worker starts.
"""

import logging
import os
import time
from pathlib import Path
from typing import Any

from celery import Celery, signals
from prometheus_client import REGISTRY, CollectorRegistry, start_http_server

from rubricate.common.logging import REQUEST_ID, configure_logging
from rubricate.common.metrics import JOB_DURATION
from rubricate.common.queue_metrics import register_queue_depth_collector

log = logging.getLogger("rubricate.worker")

REQUEST_ID_HEADER = "rubricate_request_id"
DEFAULT_METRICS_PORT = 9808
SERVICE = "miner-worker"

_OUTCOMES = {"SUCCESS": "success", "RETRY": "retry"}
_started: dict[str, tuple[float, Any]] = {}


def job_outcome(state: str | None) -> str:
    """success | retry | failure (FAILURE, REVOKED, REJECTED, ...)."""
    return _OUTCOMES.get(state or "", "failure")


def task_request_id(request: Any) -> str | None:
    """The request id a task message carries (a custom header: an attribute of the task
    request, or under `headers` with some Celery versions)."""
    rid = getattr(request, REQUEST_ID_HEADER, None)
    if rid is None:
        headers = getattr(request, "headers", None) or {}
        rid = headers.get(REQUEST_ID_HEADER) if isinstance(headers, dict) else None
    return str(rid) if rid else None


# ------------------------------------------------------------------------------ signal handlers
def _setup_logging(**_: Any) -> None:
    configure_logging(service=SERVICE)


def _before_publish(headers: dict[str, Any] | None = None, **_: Any) -> None:
    rid = REQUEST_ID.get()
    if rid and headers is not None and REQUEST_ID_HEADER not in headers:
        headers[REQUEST_ID_HEADER] = rid


def _task_prerun(task_id: str | None = None, task: Any = None, **_: Any) -> None:
    if task_id is None or task is None:
        return
    # an eager task (embedded mode) runs inside the request that queued it: keep that id
    token = REQUEST_ID.set(task_request_id(task.request) or REQUEST_ID.get())
    _started[task_id] = (time.perf_counter(), token)


def _task_postrun(
    task_id: str | None = None, task: Any = None, state: str | None = None, **_: Any
) -> None:
    if task_id is None or task is None or task_id not in _started:
        return
    started, token = _started.pop(task_id)
    JOB_DURATION.labels(task.name, job_outcome(state)).observe(time.perf_counter() - started)
    try:
        REQUEST_ID.reset(token)
    except ValueError:  # postrun in another context than prerun: just clear it
        REQUEST_ID.set(None)


def clear_stale_multiprocess_files(directory: Path, *, keep_pid: int) -> int:
    """Remove prometheus-client metric files of other processes (earlier runs); returns how many."""
    removed = 0
    for path in directory.glob("*.db"):
        pid = path.stem.rsplit("_", 1)[-1]
        if pid != str(keep_pid):
            path.unlink(missing_ok=True)
            removed += 1
    return removed


def metrics_registry(app: Celery) -> CollectorRegistry:
    """The registry the worker serves: multiprocess-aggregated where configured, plus the
    queue-depth collector for the app's queues on a Redis broker."""
    directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    registry: CollectorRegistry = REGISTRY
    if directory:
        from prometheus_client import multiprocess

        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry, path=directory)  # type: ignore[no-untyped-call]
    broker = str(app.conf.broker_url or "")
    if broker.startswith(("redis://", "rediss://")):
        queues = set(app.amqp.queues.keys()) | {app.conf.task_default_queue}
        register_queue_depth_collector(broker_url=broker, queues=queues, registry=registry)
    return registry


def _worker_init(**_: Any) -> None:
    directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if directory:
        removed = clear_stale_multiprocess_files(Path(directory), keep_pid=os.getpid())
        if removed:
            log.info("worker.metrics_files_cleared count=%d", removed)


def _worker_ready(sender: Any = None, **_: Any) -> None:
    """Serve the metrics of the worker's app (`sender` is the worker's consumer)."""
    app = getattr(sender, "app", None)
    port = int(os.environ.get("RUBRICATE_WORKER_METRICS_PORT", DEFAULT_METRICS_PORT))
    if app is None or port == 0:
        return
    start_http_server(port, registry=metrics_registry(app))
    log.info("worker.metrics_listening port=%d", port)


def _process_shutdown(pid: int | None = None, **_: Any) -> None:
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(pid or os.getpid())  # type: ignore[no-untyped-call]


_HANDLERS: tuple[tuple[Any, Any, str], ...] = (
    (signals.setup_logging, _setup_logging, "rubricate-logging"),
    (signals.before_task_publish, _before_publish, "rubricate-request-id"),
    (signals.task_prerun, _task_prerun, "rubricate-prerun"),
    (signals.task_postrun, _task_postrun, "rubricate-postrun"),
    (signals.worker_init, _worker_init, "rubricate-worker-init"),
    (signals.worker_ready, _worker_ready, "rubricate-worker-ready"),
    (signals.worker_process_shutdown, _process_shutdown, "rubricate-process-shutdown"),
)


def install(app: Celery) -> None:
    """Connect the handlers; safe to call more than once and for several apps (the handlers
    are process-wide and find the worker's app from the signal's sender).

    `app` is the app whose module calls this; the handlers connect before its worker
    configures logging.
    """
    _ = app  # the signals are Celery-wide
    for signal, handler, uid in _HANDLERS:
        signal.connect(handler, weak=False, dispatch_uid=uid)
