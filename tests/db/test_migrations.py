import subprocess
import sys
from pathlib import Path

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect

from rubricate.db.engine import make_engine
from rubricate.db.migrate import MIGRATIONS_DIR, current_revision, head_revision, upgrade_to_head
from rubricate.tables import Base


def _schema_diff(url: str) -> list[object]:
    engine = make_engine(url, pooled=False)
    try:
        with engine.connect() as conn:
            return list(compare_metadata(MigrationContext.configure(conn), Base.metadata))
    finally:
        engine.dispose()


def test_migrations_ship_inside_the_package() -> None:
    assert (MIGRATIONS_DIR / "env.py").is_file()
    assert (MIGRATIONS_DIR / "script.py.mako").is_file()
    assert (MIGRATIONS_DIR / "alembic.ini").is_file()
    assert head_revision() == "0008"


def test_postgres_is_at_head_and_matches_the_models(pg_url: str) -> None:
    assert current_revision(pg_url) == head_revision()
    assert upgrade_to_head(pg_url) == head_revision()  # idempotent
    assert _schema_diff(pg_url) == []
    engine = make_engine(pg_url, pooled=False)
    try:
        indexes = {ix["name"] for ix in inspect(engine).get_indexes("rubrics")}
    finally:
        engine.dispose()
    assert "ix_rubrics_live" in indexes


def test_sqlite_migrates_to_head_and_matches_the_models(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'nested' / 'store.db'}"
    assert current_revision(url) is None
    assert upgrade_to_head(url) == head_revision()
    assert current_revision(url) == head_revision()
    assert upgrade_to_head(url) == head_revision()
    assert _schema_diff(url) == []


def test_migrate_entry_point_uses_the_settings(tmp_path: Path) -> None:
    env = {"RUBRICATE_DATA_DIR": str(tmp_path / "data"), "PATH": "/usr/bin:/bin"}
    out = subprocess.run(
        [sys.executable, "-m", "rubricate.store.migrate"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert "migrated to head" in out.stdout
    assert current_revision(f"sqlite:///{tmp_path / 'data' / 'rubricate.db'}") == head_revision()
