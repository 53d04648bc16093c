"""Pure nugget-reward rules: blocks, max-pooling, the weighted reward and exact match
(`rewards`), label calibration (`calibration`), word overlap (`lexical`), the grounding check
(`grounding`). Domain contract: only `rubricate.core` and the client; no I/O, web, database,
network or model library, no role code."""
