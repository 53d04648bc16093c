"""Step-level rubrics (Co-ReAct, ARCO): a rubric for the agent's next action, action
verification, step rewards summing to the outcome, listwise rewards and multi-judge ranking.
Roles: `domain/`, `prompts/`, `generator/`, `verifier/`, `gateway/`; `settings`
(`RUBRICATE_STEPS_*`). Independent of the other capabilities: plumbing and the client only."""
