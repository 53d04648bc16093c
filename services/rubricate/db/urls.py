"""Database URLs: the default SQLite file, psycopg 3 for PostgreSQL URLs."""

import os
from pathlib import Path

DEFAULT_DB_FILE = "rubricate.db"


def normalize_database_url(url: str) -> str:
    """`postgresql://` and `postgres://` select psycopg 3; other URLs are left as they are."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


def sqlite_path(url: str) -> Path | None:
    """The file of a file-backed SQLite URL, else None (other databases, `:memory:`)."""
    if not url.startswith("sqlite"):
        return None
    _, sep, rest = url.partition(":///")
    if not sep:
        return None
    path = rest.split("?", 1)[0]
    if not path or path == ":memory:" or path.startswith("file:"):
        return None
    return Path(path)


def default_database_url(data_dir: Path) -> str:
    """The embedded default: a SQLite file in the data dir."""
    return f"sqlite:///{data_dir / DEFAULT_DB_FILE}"


def database_url_from_env() -> str:
    """`RUBRICATE_DATABASE_URL`, else the default under `RUBRICATE_DATA_DIR` (the same
    resolution as the store's settings, for Alembic run on its own)."""
    url = os.environ.get("RUBRICATE_DATABASE_URL", "")
    if url:
        return normalize_database_url(url)
    return default_database_url(Path(os.environ.get("RUBRICATE_DATA_DIR", "var")))
