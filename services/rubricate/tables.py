"""Every table of the one database, registered on `Base.metadata` for Alembic and the schema
check. The store service owns the rubric-buffer, bank and scoring tables; the miner owns the
corpus, job, mined-nugget and audit tables (`docs/architecture.md`, "Tables"). One Alembic
history (`rubricate/db/migrations`) migrates them all; `rubricate store migrate` runs it."""

from rubricate.audit.miner import models as audit_models
from rubricate.db.base import Base
from rubricate.mining.miner import models as mining_models
from rubricate.reflections.store import models as bank_models
from rubricate.stagewise.store import models as buffer_models

__all__ = ["Base", "audit_models", "bank_models", "buffer_models", "metadata", "mining_models"]

metadata = Base.metadata
