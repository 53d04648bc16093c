"""Prompts of nugget labelling: the label prompt of one answer block against a batch of
nuggets (`labels`) and the ten label output formats with their parser (`formats`). Runs on the
model servers: imports `llm`, `nuggets.domain` and the client, never the database layer."""
