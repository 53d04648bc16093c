"""Real PostgreSQL and Redis for the service tests.

RUBRICATE_TEST_DATABASE_URL: a PostgreSQL server to create a throwaway database on, as a
user allowed to create databases (default postgresql://postgres@127.0.0.1:5432/postgres).
RUBRICATE_TEST_REDIS_URL: a Redis database that the tests flush (default db 15).
Neither is optional: when one is unreachable the tests that need it fail, saying so.
"""

import os
import uuid
from collections.abc import Iterator

import pytest
import redis
from sqlalchemy import Engine, make_url, text
from sqlalchemy.exc import OperationalError

from rubricate.db.engine import make_engine
from rubricate.db.migrate import upgrade_to_head
from rubricate.db.urls import normalize_database_url

DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/postgres"
DEFAULT_REDIS = "redis://127.0.0.1:6379/15"


def _admin_url() -> str:
    return normalize_database_url(os.environ.get("RUBRICATE_TEST_DATABASE_URL", DEFAULT_PG))


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """A fresh PostgreSQL database migrated to head, dropped after the session."""
    admin_url = make_url(_admin_url())
    admin = make_engine(
        admin_url.render_as_string(hide_password=False), pooled=False
    ).execution_options(isolation_level="AUTOCOMMIT")
    name = f"rubricate_test_{uuid.uuid4().hex[:12]}"
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
    except OperationalError as exc:
        admin.dispose()
        pytest.fail(
            f"PostgreSQL is not reachable at {admin_url.render_as_string(hide_password=True)} "
            f"({type(exc).__name__}: {str(exc).splitlines()[0]}). Start it (the CI script does) "
            "or point RUBRICATE_TEST_DATABASE_URL at one.",
            pytrace=False,
        )
    url = admin_url.set(database=name).render_as_string(hide_password=False)
    try:
        upgrade_to_head(url)
        yield url
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture(scope="session")
def pg_engine(pg_url: str) -> Iterator[Engine]:
    engine = make_engine(pg_url, pool_size=10, max_overflow=10)
    yield engine
    engine.dispose()


@pytest.fixture(scope="session")
def redis_url() -> str:
    url = os.environ.get("RUBRICATE_TEST_REDIS_URL", DEFAULT_REDIS)
    client = redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=2)
    try:
        client.ping()
    except redis.RedisError as exc:
        pytest.fail(
            f"Redis is not reachable at {url} ({type(exc).__name__}: {exc}). Start it (the CI "
            "script does) or point RUBRICATE_TEST_REDIS_URL at one.",
            pytrace=False,
        )
    finally:
        client.close()
    return url


@pytest.fixture
def redis_client(redis_url: str) -> Iterator["redis.Redis[str]"]:
    """A client on the test Redis database, flushed before each test."""
    client: redis.Redis[str] = redis.Redis.from_url(redis_url, decode_responses=True)
    client.flushdb()
    yield client
    client.close()


@pytest.fixture
def tenant() -> str:
    """A tenant of its own per test: tests never see each other's buffers."""
    return f"t-{uuid.uuid4().hex[:12]}"
