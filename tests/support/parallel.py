"""Isolation of pytest-xdist workers that share one Redis server.

Worker `gwN` flushes its own databases: the test data database (RUBRICATE_TEST_REDIS_URL,
default db 15) moved down by N, and the test broker database (RUBRICATE_TEST_BROKER_URL,
default db 7 under xdist, db 13 without) moved down by N. Up to 8 workers fit Redis's 16
default databases without overlap. Without xdist nothing changes.
"""

import os
from urllib.parse import urlsplit

_DATA = ("RUBRICATE_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
_BROKER = ("RUBRICATE_TEST_BROKER_URL", "redis://127.0.0.1:6379/7")
MAX_WORKERS = 8


def worker_number() -> int | None:
    """N of worker `gwN`, or None outside pytest-xdist."""
    name = os.environ.get("PYTEST_XDIST_WORKER", "")
    return int(name[2:]) if name.startswith("gw") and name[2:].isdigit() else None


def isolate_worker() -> None:
    n = worker_number()
    if n is None:
        return
    if n >= MAX_WORKERS:
        raise RuntimeError(f"at most {MAX_WORKERS} xdist workers share the test Redis")
    for variable, default in (_DATA, _BROKER):
        os.environ[variable] = shifted(os.environ.get(variable, default), n)


def shifted(url: str, n: int) -> str:
    """`url` with its database number lowered by `n` (redis://host:port/db)."""
    parts = urlsplit(url)
    path = parts.path.strip("/")
    db = int(path) if path else 0
    if db - n < 0:
        raise RuntimeError(f"{url}: no Redis database {db - n} for xdist worker gw{n}")
    return parts._replace(path=f"/{db - n}").geturl()
