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


def test_real_model_tests_get_one_llama_thread_under_xdist_unless_the_run_sets_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import os

    monkeypatch.delenv("RUBRICATE_LLM_N_THREADS", raising=False)
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    niceness = os.nice(0)
    parallel.yield_cpu()  # outside xdist: nothing
    assert os.nice(0) == niceness and parallel.model_threads() is None
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    assert parallel.model_threads() == "1"
    monkeypatch.setenv("RUBRICATE_LLM_N_THREADS", "2")
    assert parallel.model_threads() is None
