"""Fixtures every test directory may use: real PostgreSQL and Redis (`tests/support/databases`)
and the store's engines (`tests/support/store`). The gateway's and the miner's running
platforms are fixtures of the directories that use them (their `conftest.py`).

Under pytest-xdist (`make test` runs the suite on several workers) each worker is its own
pytest session: its own PostgreSQL database already (a fresh one per session), and here its
own Redis databases, because the tests flush theirs (`tests/support/parallel`). Every test
that needs the real model runs on one worker, one after the other, starting first
(`parallel.ModelTestsTogether`): two model tests at once on two cores would only slow each
other down. The other tests are scheduled a file at a time. Under xdist the real-model tests
run llama.cpp on one thread and every other test's worker lowers its priority
(`parallel.yield_cpu`, `parallel.model_threads`): the model's threads otherwise wait on
each other whenever another process holds a core.

A real-model test runs without the audit unless it is marked `audit`: the audit re-scores a
question's first group in the background with the same model and the other design (about
100 s per rollout on CPU), which a test not about the audit would only wait for."""

import pytest

from tests.support import ast_guard, parallel

pytest_plugins = ["tests.support.databases", "tests.support.store"]

ast_guard.install()


def pytest_configure(config: pytest.Config) -> None:
    parallel.isolate_worker()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The real-model tests first (the longest run of the suite starts at once), each in a
    file named `*_real_model.py`, which is how the xdist scheduler knows them."""
    model = [item for item in items if item.get_closest_marker("model") is not None]
    misplaced = sorted({str(i.path) for i in model if not parallel.is_model_file(i.nodeid)})
    if misplaced:
        raise pytest.UsageError(
            "tests marked `model` must live in files named *_real_model.py (they run one "
            f"after the other on one xdist worker): {misplaced}"
        )
    chosen = set(map(id, model))
    items[:] = model + [item for item in items if id(item) not in chosen]


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("model") is None:
        parallel.yield_cpu()


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    return parallel.ModelTestsTogether(config, log)


@pytest.fixture(autouse=True)
def _real_model_test_settings(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    node = request.node
    if node.get_closest_marker("model") is None:
        return
    if not node.get_closest_marker("audit"):
        monkeypatch.setenv("RUBRICATE_AUDIT_ENABLED", "false")
    if threads := parallel.model_threads():
        monkeypatch.setenv("RUBRICATE_LLM_N_THREADS", threads)
