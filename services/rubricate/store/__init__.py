"""The store service: each question's per-stage rubric buffer (RubricEM App. C.1, C.4).

Routes (`routes.py`) call the async `BufferService` (`service.py`), which caches reads and
runs the synchronous `BufferStore` units of work in worker threads; `BufferStore` uses
`BufferRepository` (`repository.py`) for SQL. The buffer policy itself lives in the core.
"""
