"""Engines and units of work.

Every write to a question's buffer is serialized: on PostgreSQL by the question row's lock
(`SELECT … FOR UPDATE`, see the repository); on SQLite by taking the database write lock
up front (`BEGIN IMMEDIATE`), with WAL so readers never wait on a writer and
`busy_timeout` so writers queue instead of failing.
"""

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from weakref import WeakKeyDictionary

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session
from sqlalchemy.pool import NullPool, StaticPool

from rubricate.db.urls import normalize_database_url, sqlite_path

_IMMEDIATE = "rubricate_sqlite_immediate"
"""Execution option: begin the SQLite transaction with `BEGIN IMMEDIATE`."""


def is_sqlite(engine: Engine) -> bool:
    return engine.dialect.name == "sqlite"


PG_STATEMENT_TIMEOUT_MS = 30_000


def make_engine(
    url: str,
    *,
    pool_size: int = 5,
    max_overflow: int = 10,
    sqlite_busy_timeout_s: float = 30.0,
    pooled: bool = True,
) -> Engine:
    url = normalize_database_url(url)
    if url.startswith("sqlite"):
        return _sqlite_engine(url, busy_timeout_s=sqlite_busy_timeout_s, pooled=pooled)
    # a dead database answers in seconds, not after the OS's TCP timeout; a stuck statement
    # is cancelled by the server rather than holding a pool connection for ever
    kwargs: dict[str, Any] = {
        "pool_pre_ping": True,
        "connect_args": {
            "connect_timeout": 5,
            "options": f"-c statement_timeout={PG_STATEMENT_TIMEOUT_MS}",
        },
    }
    if pooled:
        kwargs.update(pool_size=pool_size, max_overflow=max_overflow, pool_timeout=10)
    else:
        kwargs["poolclass"] = NullPool
    return create_engine(url, **kwargs)


def _sqlite_engine(url: str, *, busy_timeout_s: float, pooled: bool) -> Engine:
    path = sqlite_path(url)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
    kwargs: dict[str, Any] = {
        "connect_args": {"check_same_thread": False, "timeout": busy_timeout_s},
    }
    if path is None:
        kwargs["poolclass"] = StaticPool  # one in-memory database shared by every session
    elif not pooled:
        kwargs["poolclass"] = NullPool
    engine = create_engine(url, **kwargs)
    busy_ms = int(busy_timeout_s * 1000)
    wal = path is not None

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Let SQLAlchemy's "begin" event, not pysqlite, decide how transactions start.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            if wal:
                cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute(f"PRAGMA busy_timeout={busy_ms}")
            cursor.execute("PRAGMA foreign_keys=ON")
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Connection) -> None:
        immediate = connection.get_execution_options().get(_IMMEDIATE, False)
        connection.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

    return engine


_binds: "WeakKeyDictionary[Engine, tuple[Engine, Engine]]" = WeakKeyDictionary()


def _reader_writer(engine: Engine) -> tuple[Engine, Engine]:
    """Engines sharing `engine`'s pool: readers see one snapshot (PostgreSQL REPEATABLE
    READ; a SQLite read transaction in WAL mode), writers on SQLite take the write lock first
    (on PostgreSQL they lock the question row instead)."""
    found = _binds.get(engine)
    if found is None:
        if is_sqlite(engine):
            found = (engine, engine.execution_options(**{_IMMEDIATE: True}))
        elif engine.dialect.name == "postgresql":
            found = (engine.execution_options(isolation_level="REPEATABLE READ"), engine)
        else:
            found = (engine, engine)
        _binds[engine] = found
    return found


@contextmanager
def unit_of_work(engine: Engine, *, write: bool) -> Iterator[Session]:
    """One session, one transaction, one commit at the end (rollback on error)."""
    reader, writer = _reader_writer(engine)
    bind = writer if write else reader
    with Session(bind, expire_on_commit=False, autoflush=False) as session, session.begin():
        yield session
