"""Public nugget-verification routes (`routes`) and their orchestration (`service`: blocks,
exact match, one verifier task call (`nuggets.verifier.endpoints.NUGGET_LABELS`), lexical prior,
grounding, reward). Gateway contract: no model backend, no SQLAlchemy; imports
`nuggets.domain`, `nuggets.verifier.endpoints`, the verifier's `schemas`, `common`."""
