"""Public nugget-verification routes (`routes`) and their orchestration (`service`: blocks,
exact match, one verifier task call, lexical prior, grounding, reward). Gateway contract: no
model backend, no SQLAlchemy; imports `nuggets.domain`, the verifier's `schemas`, `common`."""
