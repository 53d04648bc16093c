"""Fixtures every test directory may use: real PostgreSQL and Redis (`tests/support/databases`)
and the store's engines (`tests/support/store`). The gateway's and the miner's running
platforms are fixtures of the directories that use them (their `conftest.py`)."""

from tests.support import ast_guard

pytest_plugins = ["tests.support.databases", "tests.support.store"]

ast_guard.install()
