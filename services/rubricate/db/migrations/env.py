"""Alembic environment of the store.

The database comes from, in order: a connection passed by `upgrade_to_head`
(`config.attributes["connection"]`), `sqlalchemy.url` in the config, or the store settings
(`RUBRICATE_DATABASE_URL`).
"""

from alembic import context
from sqlalchemy.engine import Connection

from rubricate.db.urls import database_url_from_env
from rubricate.tables import metadata

config = context.config
target_metadata = metadata


def _url() -> str:
    url = config.get_main_option("sqlalchemy.url")
    if url:
        return url
    return database_url_from_env()


def _configure(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )


def run_migrations_offline() -> None:
    context.configure(
        url=_url(),
        target_metadata=target_metadata,
        literal_binds=True,
        dialect_opts={"paramstyle": "named"},
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _configure(connection)
        with context.begin_transaction():
            context.run_migrations()
        return
    from rubricate.db.engine import make_engine

    engine = make_engine(_url(), pooled=False)
    try:
        with engine.begin() as conn:
            _configure(conn)
            with context.begin_transaction():
                context.run_migrations()
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
