"""The reflection-judging prompt (`judging`): a candidate scored as future guidance, with
privileged access to the stage scores and verdicts. Runs on the model servers: imports `llm`,
`reflections.domain` and the client, never the database layer, Celery or Qdrant."""
