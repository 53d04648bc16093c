"""The verifier's step tasks, `POST /v1/tasks/step-verdicts` and `/v1/tasks/rank` (`schemas`,
`service`, `routes`). Model-server contract: `llm`, `common`, `steps.prompts`,
`steps.settings`; never the database layer, Celery or Qdrant."""
