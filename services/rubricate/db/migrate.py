"""Alembic migrations of the one database, run programmatically (`upgrade_to_head`); the
store service runs them: `rubricate store migrate` or `python -m rubricate.store.migrate`.

The migration scripts ship inside the package (`rubricate/db/migrations`), so this works
from an installed wheel as well as from a checkout.
"""

import logging
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, text

from rubricate.db.engine import make_engine

log = logging.getLogger("rubricate.store.migrate")

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
_PG_LOCK_KEY = 0x52554252  # advisory lock: one migrator at a time across replicas


def alembic_config() -> Config:
    cfg = Config(str(MIGRATIONS_DIR / "alembic.ini"))
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR).replace("%", "%%"))
    return cfg


def head_revision() -> str:
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    if head is None:
        raise RuntimeError(f"no migrations found in {MIGRATIONS_DIR}")
    return str(head)


def _engine(database: str | Engine) -> tuple[Engine, bool]:
    if isinstance(database, Engine):
        return database, False
    return make_engine(database, pooled=False), True


def current_revision(database_url: str | Engine) -> str | None:
    engine, owned = _engine(database_url)
    try:
        with engine.connect() as conn:
            rev = MigrationContext.configure(conn).get_current_revision()
            return None if rev is None else str(rev)
    finally:
        if owned:
            engine.dispose()


def upgrade_to_head(database_url: str | Engine) -> str:
    """Migrate the database (a URL or an engine) to the newest revision; returns it.

    One transaction on PostgreSQL (transactional DDL), serialized across processes by an
    advisory lock, so replicas starting together migrate once.
    """
    engine, owned = _engine(database_url)
    cfg = alembic_config()
    try:
        with engine.begin() as conn:
            if conn.dialect.name == "postgresql":
                conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_LOCK_KEY})
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "head")
    finally:
        if owned:
            engine.dispose()
    head = head_revision()
    log.info("store.migrated revision=%s", head)
    return head
