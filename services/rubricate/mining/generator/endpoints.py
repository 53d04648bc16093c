"""The rubric generator's mining tasks as typed endpoint values, declared once: the route
decorators take their paths from here, and the miner calls them with the platform's
`ServiceClient`. An endpoint's `name` is its task's label (the `*_TASK` constants of the
service), which a model failure's message names. Imports only task schemas (the model
server imports it); it lives beside them so that the package has no import cycle."""

from rubricate.common.endpoints import TASKS, post
from rubricate.mining.generator.schemas import (
    NuggetExtractionRequest,
    NuggetExtractionResponse,
    NuggetImportanceRequest,
    NuggetImportanceResponse,
    NuggetMergeRequest,
    NuggetMergeResponse,
    QueryRewritesRequest,
    QueryRewritesResponse,
)

QUERY_REWRITES = post(
    "query_rewrites", f"{TASKS}/query-rewrites", QueryRewritesRequest, QueryRewritesResponse
)
"""New search queries from a query and a passage it retrieved."""

NUGGET_EXTRACTION = post(
    "nugget_extraction",
    f"{TASKS}/nugget-extraction",
    NuggetExtractionRequest,
    NuggetExtractionResponse,
)
"""A passage's nuggets for the question."""

NUGGET_MERGE = post(
    "nugget_merge", f"{TASKS}/nugget-merge", NuggetMergeRequest, NuggetMergeResponse
)
"""The question's nuggets that say the same thing, merged."""

NUGGET_IMPORTANCE = post(
    "nugget_importance",
    f"{TASKS}/nugget-importance",
    NuggetImportanceRequest,
    NuggetImportanceResponse,
)
"""Each nugget labelled vital or okay."""
