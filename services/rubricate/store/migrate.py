"""`python -m rubricate.store.migrate`: migrate the store's database to head (the store
service owns the schema history; see `rubricate.db.migrate`)."""

import logging
import sys

from rubricate.db.migrate import upgrade_to_head
from rubricate.store.settings import StoreSettings


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    settings = StoreSettings()
    revision = upgrade_to_head(settings.database_url)
    print(f"rubricate: database migrated to head ({revision})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
