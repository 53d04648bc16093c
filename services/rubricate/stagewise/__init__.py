"""Stagewise rewards (RubricEM): Plan/Research/Review/Answer trajectories scored per stage
against rubrics, SS-GRPO returns and advantages, the judge's per-question rubric buffer.
Roles: `domain/`, `prompts/`, `generator/`, `verifier/`, `gateway/`, `store/`. The lowest
capability layer: it imports only `llm`, `rpc`, `common`, `db`, `core` and the client."""
