"""Judge prompts of the nugget-mining pipeline (`pipeline`): the six tasks' prompts, output
models and parsers. Runs on the model servers: imports `llm`, `mining.domain` and the client,
never the database layer, Celery or Qdrant."""
