"""pytest-xdist for the suite: the scheduling of the real-model tests, and the isolation of
workers that share one Redis server.

Scheduling (`ModelTestsTogether`): a file is a unit of work, and every `*_real_model.py`
file together is one (the tests marked `model`, which `tests/conftest.py` puts first), so
the real-model tests run one after the other on the first worker while the others share the
rest. xdist's own `--dist loadgroup` would do this with `xdist_group` marks, but its
grouping rewrites `item._nodeid`, which pytest 9 no longer reads: the marks were ignored.

CPU (`yield_cpu`, `model_threads`): the real model is the suite's longest run, and under
contention llama.cpp's threads wait on each other at every barrier (a 25 s test took 64 s beside two
busy processes). So under xdist a worker lowers its own priority (nice 10, once, inherited
by the services and trainers it starts) before its first test that is not a real-model
test, and the real-model tests run llama.cpp on one thread (`RUBRICATE_LLM_N_THREADS=1`
unless set): one core nearly their own, the other core and the rest of the first one for the
other workers. Measured on the 2-core machine (2026-11-29): the steps test 27 s alone on two
threads, 40 s alone on one, 64 s on two beside two busy processes, 31 s beside two busy
processes at nice 10.

Worker `gwN` flushes its own databases: the test data database (RUBRICATE_TEST_REDIS_URL,
default db 15) moved down by N, and the test broker database (RUBRICATE_TEST_BROKER_URL,
default db 7 under xdist, db 13 without) moved down by N. Up to 8 workers fit Redis's 16
default databases without overlap. Without xdist nothing changes.
"""

import os
from typing import Any
from urllib.parse import urlsplit

from xdist.scheduler import LoadScopeScheduling  # type: ignore[import-untyped]

_DATA = ("RUBRICATE_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
_BROKER = ("RUBRICATE_TEST_BROKER_URL", "redis://127.0.0.1:6379/7")
MAX_WORKERS = 8


MODEL_SCOPE = "real-model"


def is_model_file(nodeid: str) -> bool:
    return nodeid.split("::", 1)[0].endswith("_real_model.py")


class ModelTestsTogether(LoadScopeScheduling):  # type: ignore[misc]
    """Scopes: the real-model files together, every other file alone, in collection order
    (the model scope first)."""

    def __init__(self, config: Any, log: Any = None) -> None:
        super().__init__(config, log)
        config.option.loadscopereorder = False  # keep the collection's order: model first

    def _split_scope(self, nodeid: str) -> str:
        return MODEL_SCOPE if is_model_file(nodeid) else nodeid.split("::", 1)[0]


MODEL_THREADS = "1"
NICE = 10


def yield_cpu() -> None:
    """Under xdist: the worker yields CPU to the real-model tests (nice 10, once; a test
    that is not a real-model test calls it before its fixtures start anything)."""
    if worker_number() is not None and os.nice(0) < NICE:
        os.nice(NICE - os.nice(0))


def model_threads() -> str | None:
    """Under xdist, the llama.cpp thread count of a real-model test, unless the run sets one."""
    if worker_number() is None or "RUBRICATE_LLM_N_THREADS" in os.environ:
        return None
    return MODEL_THREADS


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
