"""The verifier's nugget-label task, `POST /v1/tasks/nugget-labels` (`schemas`, `service`,
`routes`), with the shipped label calibrations in `calibrations/`. Model-server contract:
`llm`, `common`, `nuggets.prompts`, `nuggets.domain`; never the database layer, Celery or Qdrant."""
