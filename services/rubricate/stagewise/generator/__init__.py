"""The rubric-generator's stage-rubric task, `POST /v1/tasks/stage-rubrics` (`schemas`,
`service`, `routes`): one structured call per rollout group. Model-server contract: `llm`,
`common`, `stagewise.prompts`; never the database layer, Celery or Qdrant."""
