"""The store's rubric-history routes (served by `audit.store.routes`) as typed endpoint
values, declared once: the store's route decorators take their paths from here and the
gateway calls them (`ServiceClient.call`, segments escaped by `Endpoint.url_path`). The
export is JSON Lines (`JsonLines`): read as a stream, not validated."""

from rubricate.common.endpoints import get
from rubricate_client.endpoints import JsonLines
from rubricate_client.schemas.audit import RubricHistory

BUFFER_HISTORY = get("store_buffer_history", "/v1/buffers/{question_id}/history", RubricHistory)
"""Every rubric that was ever in the question's buffer."""

HISTORY_EXPORT = get("store_rubric_history_export", "/v1/audit/rubric-history", JsonLines)
"""The tenant's rubric history as JSONL."""
