"""The store's side of the bank: tables of items, versions, snapshots and stored stagewise
scorings (`models`), SQL (`repository`), question vectors in Qdrant (`index`), `service`,
`snapshots`, `routes` (`/v1/bank/*`, `/v1/scorings`), `schemas`. Runs on the store; imports
`reflections.domain`, `common`, `db`, `core` and (the allowed exception) `stagewise.store`."""
