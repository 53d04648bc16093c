"""Prompts of the step tasks: step-rubric generation (`rubric`), verification of an action
against a step rubric (`verify`), listwise ranking of a candidate slate (`ranking`). Runs on
the model servers: imports `llm` and the client, never the database layer, Celery or Qdrant."""
