"""Pure step-level rules: segmentation of ReAct trajectories (`segmentation`), weighted
criteria, verification and step rewards (`rewards`), Spearman, Borda and the
rubric-generator reward (`listwise`). Domain contract: only `rubricate.core` and the client;
no I/O, web, database, network or model library, no role code."""
