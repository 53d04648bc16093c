from pathlib import Path

import pytest

from rubricate.db.urls import normalize_database_url, sqlite_path
from rubricate.store.settings import StoreSettings


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("postgresql://u:p@h:5432/db", "postgresql+psycopg://u:p@h:5432/db"),
        ("postgres://u@h/db", "postgresql+psycopg://u@h/db"),
        ("postgresql+psycopg://u@h/db", "postgresql+psycopg://u@h/db"),
        ("sqlite:///var/x.db", "sqlite:///var/x.db"),
    ],
)
def test_database_url_normalization(url: str, expected: str) -> None:
    assert normalize_database_url(url) == expected


def test_sqlite_path() -> None:
    assert sqlite_path("sqlite:///var/x.db") == Path("var/x.db")
    assert sqlite_path("sqlite:////abs/x.db?timeout=3") == Path("/abs/x.db")
    assert sqlite_path("sqlite://") is None
    assert sqlite_path("sqlite:///:memory:") is None
    assert sqlite_path("postgresql+psycopg://h/db") is None


def test_defaults_to_sqlite_in_the_data_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RUBRICATE_DATABASE_URL", raising=False)
    monkeypatch.setenv("RUBRICATE_DATA_DIR", str(tmp_path / "data"))
    settings = StoreSettings()
    assert settings.database_url == f"sqlite:///{tmp_path / 'data' / 'rubricate.db'}"
    assert (tmp_path / "data").is_dir()
    assert settings.redis_url is None
    assert settings.cache_ttl_s == 300
    assert settings.auto_migrate is True


def test_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RUBRICATE_DATABASE_URL", "postgresql://rubricate@db:5432/rubricate")
    monkeypatch.setenv("RUBRICATE_REDIS_URL", "redis://cache:6379/0")
    monkeypatch.setenv("RUBRICATE_CACHE_TTL_S", "30")
    monkeypatch.setenv("RUBRICATE_DB_POOL_SIZE", "20")
    monkeypatch.setenv("RUBRICATE_AUTO_MIGRATE", "false")
    monkeypatch.setenv("RUBRICATE_GATEWAY_STORE_URL", "http://ignored")  # other services' env
    settings = StoreSettings()
    assert settings.database_url == "postgresql+psycopg://rubricate@db:5432/rubricate"
    assert settings.redis_url == "redis://cache:6379/0"
    assert settings.cache_ttl_s == 30
    assert settings.db_pool_size == 20
    assert settings.auto_migrate is False
