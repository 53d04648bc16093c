"""The rubric-generator's nugget-mining tasks under `/v1/tasks`: query rewrites, nugget
extraction, merging and importance (`schemas` is the internal contract, `service`, `routes`).
Model-server contract: `llm`, `common`, `mining.prompts` and `mining.domain`; never the
database layer, Celery or Qdrant."""
