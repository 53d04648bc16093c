"""The gateway's mining routes (`routes`): corpora, mining jobs and mined nuggets, forwarded to
the miner through `common.upstream`. Gateway contract: no model backend, no SQLAlchemy; it
imports `common` and the client."""
