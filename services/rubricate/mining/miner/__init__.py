"""The miner's side of mining: corpus vectors in Qdrant (`index`), document `loaders`, the judge
steps over HTTP (`judge`), the job loop with heartbeats and resume (`runner`), `service`,
`routes`, tables (`models`), `repository`, `settings`. Runs on the miner and its Celery
workers; imports `mining.domain`, the generator's and verifier's `schemas`, `common`, `db`."""
