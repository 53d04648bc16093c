from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from rubricate.db.engine import make_engine
from rubricate.db.migrate import upgrade_to_head
from rubricate.stagewise.store.service import BufferStore


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'store.db'}"


@pytest.fixture
def sqlite_engine(sqlite_url: str) -> Iterator[Engine]:
    upgrade_to_head(sqlite_url)
    engine = make_engine(sqlite_url)
    yield engine
    engine.dispose()


@pytest.fixture(params=["postgresql", "sqlite"])
def engine(request: pytest.FixtureRequest) -> Engine:
    """The same behaviour is required of both databases."""
    name = "pg_engine" if request.param == "postgresql" else "sqlite_engine"
    result: Engine = request.getfixturevalue(name)
    return result


@pytest.fixture
def store(engine: Engine) -> BufferStore:
    return BufferStore(engine)
