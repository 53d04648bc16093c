"""Nugget mining (Search-Gen-V §3.2): a tree search over a corpus that builds a question's
nuggets. Roles: `domain/`, `prompts/`, `generator/` and `verifier/` (the judge tasks),
`gateway/` (routes forwarded to the miner), `miner/` (index, jobs, runner). Independent of the
other capabilities: it imports only plumbing (`llm`, `common`, `db`, `core`) and the client."""
