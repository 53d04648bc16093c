"""Migration 0006 on a bank written before it: every item is kept, pending, with its
current version as the start of its history (and kept again by the downgrade)."""

from pathlib import Path

from alembic import command
from sqlalchemy import text

from rubricate.core.normalize import question_hash
from rubricate.db.engine import make_engine
from rubricate.db.migrate import alembic_config, upgrade_to_head
from rubricate.reflections.store.repository import BankStore


def test_items_written_before_0006_are_pending_with_their_history(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    engine = make_engine(url, pooled=False)
    try:
        cfg = alembic_config()
        with engine.begin() as conn:
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "0005")
        h = question_hash("An old question?")
        with engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO bank_items (tenant, question_hash, question, rubrics, "
                    "takeaways, reflection, score, step, provenance, created_at, updated_at, "
                    "version) VALUES ('t', :h, 'An old question?', :r, :k, 'text', 0.5, 3, "
                    "'{}', '2026-01-01 00:00:00', '2026-01-02 00:00:00', 2)"
                ),
                {"h": h, "r": '{"Pitfalls": ["old pitfall"]}', "k": '["old lesson"]'},
            )
        upgrade_to_head(engine)
        bank = BankStore(engine)
        stored = bank.get("t", h)
        assert stored is not None and stored.status == "pending" and stored.version == 2
        assert stored.takeaways == ["old lesson"]
        history = bank.history("t", h)
        assert history is not None
        [first] = history.versions
        assert (first.version, first.action, first.author) == (2, "replaced", None)
        assert first.rubrics == {"Pitfalls": ["old pitfall"]} and first.step == 3
        listed = bank.list_items("t")
        assert listed.total == 1 and listed.items[0].status == "pending"
        # and back: the items stay
        with engine.begin() as conn:
            cfg.attributes["connection"] = conn
            command.downgrade(cfg, "0005")
        with engine.connect() as conn:
            assert conn.execute(text("SELECT version FROM bank_items")).scalar_one() == 2
    finally:
        engine.dispose()
