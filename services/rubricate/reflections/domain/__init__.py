"""Pure rules of reflections and the bank: the two-block format check, the utility u and the
best candidate (`reflection`); the newer-wins rule, curation and `<reference_examples>` blocks
(`bank`). Domain contract: only `rubricate.core` and the client; no I/O, web, database,
network or model library, no role code."""
