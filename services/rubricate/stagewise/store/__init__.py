"""The store's side of the rubric buffer: tables `questions`, `rubrics`, `rubric_curations`
(`models`), SQL (`repository`), `BufferStore`/`BufferService` (`service`), the `/v1/buffers/…`
routes, and the internal wire models with the shape of a stored scoring (`schemas`). Runs on
the store; imports `stagewise.domain`, `common`, `db`, `core`."""
