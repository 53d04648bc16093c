"""The store's side of the rubric buffer and of stored stagewise scorings: tables
`questions`, `rubrics`, `rubric_curations`, `stagewise_scorings` (`models`), the buffer's SQL
(`repository`), `BufferStore` and `BufferCache` (`service`), `ScoringStore` (`scorings`), the
`/v1/buffers/…` and `/v1/scorings…` routes (`routes`, paths declared in `endpoints`), and the
internal wire models (`schemas`). Runs on the store; imports `stagewise.domain`, `common`,
`db`, `core`."""
