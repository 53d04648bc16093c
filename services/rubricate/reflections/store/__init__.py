"""The store's side of the bank: tables of items, versions and snapshots (`models`), SQL
(`repository`), question vectors in Qdrant (`index`), `service`, `snapshots`, `routes`
(`/v1/bank/*`, paths declared in `endpoints`), `schemas`. Runs on the store; imports
`reflections.domain`, `common`, `db`, `core` and (the allowed exception) `stagewise.store`
(`models` and the buffer cache's key: a snapshot holds the judge rubric buffers too)."""
