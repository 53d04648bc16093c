"""The gateway's reflection-reward and bank routes (`routes`), their orchestration (`service`:
`/v1/reflections/score`, `/v1/bank/retrieve`) and snapshot export/import streamed to the store
(`bank_proxy`). Gateway contract: no model backend, no SQLAlchemy; imports
`reflections.domain`, `reflections.prompts`, the verifier's and the store's `schemas`, `common`."""
