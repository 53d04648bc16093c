"""The verifier's nugget-mining judgments under `/v1/tasks`: temporal consistency and duplicate
queries (`schemas` is the internal contract, `service`, `routes`). Model-server contract:
`llm`, `common`, `mining.prompts`; never the database layer, Celery or Qdrant."""
