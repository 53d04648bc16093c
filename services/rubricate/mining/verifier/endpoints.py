"""The verifier's mining judgments as typed endpoint values, declared once: the route
decorators take their paths from here, and the miner calls them with the platform's
`ServiceClient`. An endpoint's `name` is its task's label (the `*_TASK` constants of the
service), which a model failure's message names. Imports only task schemas (the model
server imports it); it lives beside them so that the package has no import cycle."""

from rubricate.common.endpoints import TASKS, post
from rubricate.mining.verifier.schemas import (
    QueryDuplicateRequest,
    QueryDuplicateResponse,
    TemporalCheckRequest,
    TemporalCheckResponse,
)

TEMPORAL_CHECK = post(
    "temporal_check", f"{TASKS}/temporal-check", TemporalCheckRequest, TemporalCheckResponse
)
"""Whether a passage meets the query's time constraints."""

QUERY_DUPLICATE = post(
    "query_duplicate", f"{TASKS}/query-duplicate", QueryDuplicateRequest, QueryDuplicateResponse
)
"""Whether a query repeats one already searched."""
