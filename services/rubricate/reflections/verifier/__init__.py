"""The verifier's reflection-judging task, `POST /v1/tasks/reflection-scores` (`schemas`,
`service`, `routes`). Model-server contract: `llm`, `common`, `reflections.prompts`,
`reflections.domain`; never the database layer, Celery or Qdrant."""
