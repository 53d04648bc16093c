"""The gateway's step routes (`routes`), the orchestration of `/v1/steps/*` (`service`) and
listwise rewards and multi-judge ranking (`ranking`: `/v1/rubrics/listwise-reward`,
`/v1/rank`). Gateway contract: no model backend, no SQLAlchemy; imports `steps.domain`, the
generator's and verifier's `schemas`, `common`."""
