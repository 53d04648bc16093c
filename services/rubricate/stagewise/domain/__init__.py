"""Pure stagewise rules: stage parsing (`stages`), judgments → R, G, A (`scoring`), SS-GRPO
Λ, returns and advantages (`ssgrpo`), buffer caps, variance pruning and curation rules
(`buffer`). Domain contract: only `rubricate.core` and the client; no I/O, web, database,
network or model library, no role code."""
