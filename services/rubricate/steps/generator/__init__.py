"""The rubric-generator's step-rubric task, `POST /v1/tasks/step-rubric` (`schemas`, `service`,
`routes`). Model-server contract: `llm`, `common`, `steps.prompts`, `steps.settings`; never the
database layer, Celery or Qdrant."""
