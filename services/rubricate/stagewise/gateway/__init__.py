"""The gateway's stagewise routes (`routes`: `/v1/stagewise/score`, `/v1/advantages/stagewise`,
`GET /v1/buffers/{question_id}`), the scoring orchestration (`service`) and curation and the
question list through the store (`curation`). Gateway contract: no model backend, no
SQLAlchemy; imports `stagewise.domain`, the other roles' `schemas`, `common`."""
