"""The xdist workers' Redis isolation (tests/support/parallel.py)."""

import pytest

from tests.support import parallel


def test_each_worker_moves_its_databases_down_by_its_number() -> None:
    assert parallel.shifted("redis://127.0.0.1:6379/15", 0) == "redis://127.0.0.1:6379/15"
    assert parallel.shifted("redis://127.0.0.1:6379/15", 2) == "redis://127.0.0.1:6379/13"
    assert parallel.shifted("redis://:pw@h:1/7?ssl=1", 3) == "redis://:pw@h:1/4?ssl=1"


def test_a_worker_without_a_database_left_is_refused() -> None:
    with pytest.raises(RuntimeError, match="no Redis database -1"):
        parallel.shifted("redis://127.0.0.1:6379", 1)


def test_outside_xdist_nothing_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    monkeypatch.setenv("RUBRICATE_TEST_REDIS_URL", "redis://127.0.0.1:6379/9")
    parallel.isolate_worker()
    assert parallel.worker_number() is None
    import os

    assert os.environ["RUBRICATE_TEST_REDIS_URL"] == "redis://127.0.0.1:6379/9"
