"""Pure rules of nugget mining: the tree search as a step-wise state machine (`search`) and
corpus passages of 5–10 sentences (`passages`). Domain contract: only `rubricate.core` and the
client; no I/O, web, database, network or model library, no role code."""
