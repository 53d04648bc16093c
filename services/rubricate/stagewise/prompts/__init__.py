"""Prompts of the stagewise judge: stage-rubric generation for a rollout group
(`rubric_generation`) and scoring a trajectory against the rubrics (`scoring`). Runs on the
model servers: imports `llm` and the client, never the database layer, Celery or Qdrant."""
