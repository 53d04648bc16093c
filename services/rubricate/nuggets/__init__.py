"""Nugget rewards (Search-Gen-V): an answer's blocks judged against nuggets, max-pooled and
weighted. Roles: `domain/`, `prompts/`, `verifier/` (`/v1/tasks/nugget-labels`), `gateway/`
(`/v1/nuggets/verify`, `/v1/nuggets/verify-batch`). Independent of the other capabilities: it
imports only plumbing (`llm`, `common`, `core`) and the client."""
