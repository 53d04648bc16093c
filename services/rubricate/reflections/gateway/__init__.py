"""The gateway's reflection-reward and bank routes (`routes`: the bank, snapshot and scoring
reads and writes forwarded to the store by `common.forward`), their orchestration (`service`:
`/v1/reflections/score`, `/v1/bank/retrieve`) and snapshot export/import streamed to the store
(`bank_proxy`). Gateway contract: no model backend, no SQLAlchemy; imports
`reflections.domain`, `reflections.prompts`, the verifier's and the store's `schemas`, the
internal routes it calls (`reflections.verifier.endpoints`, `reflections.store.endpoints`,
`stagewise.store.endpoints`: stored stagewise scorings), `common`."""
