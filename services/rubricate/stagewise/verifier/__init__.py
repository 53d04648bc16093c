"""The verifier's stage-score task, `POST /v1/tasks/stage-scores` (`schemas`, `service`,
`routes`), in the `generate` and `choices` designs. Model-server contract: `llm`, `common`,
`stagewise.prompts`; never the database layer, Celery or Qdrant."""
