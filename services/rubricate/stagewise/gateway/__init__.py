"""The gateway's stagewise routes (`routes`: `/v1/stagewise/score`, `/v1/advantages/stagewise`,
and the buffer read, question list and curation proxied to the store) and the scoring
orchestration (`service`). Gateway contract: no model backend, no SQLAlchemy; imports
`stagewise.domain`, the other roles' `schemas` and `endpoints`, `common`."""
