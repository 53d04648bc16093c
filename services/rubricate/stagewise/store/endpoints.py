"""The store's rubric-buffer and scoring routes as typed endpoint values, declared once: the
store's route decorators take their paths from here, and the gateway and the audit call them
with `ServiceClient.call(ENDPOINT, body, path={...})` (segments escaped by `Endpoint.url_path`)."""

from rubricate.common.endpoints import get, post
from rubricate.stagewise.store.schemas import (
    AddRubricsRequest,
    CurateRubricRequest,
    PruneRequest,
    PruneResponse,
    ScoringIn,
)
from rubricate_client.schemas.buffers import BufferView, QuestionList, RubricCurationResult
from rubricate_client.schemas.curation import CurationList
from rubricate_client.schemas.scorings import ScoringList, StoredScoring

BUFFER = get("store_buffer", "/v1/buffers/{question_id}", BufferView)
BUFFER_ADD_RUBRICS = post(
    "store_add_rubrics", "/v1/buffers/{question_id}/rubrics", AddRubricsRequest, BufferView
)
BUFFER_PRUNE = post("store_prune", "/v1/buffers/{question_id}/prune", PruneRequest, PruneResponse)
QUESTIONS = get("store_questions", "/v1/buffers", QuestionList, "search", "sort", "offset", "limit")
RUBRIC_CURATE = post(
    "store_curate_rubric",
    "/v1/buffers/{question_id}/rubrics/{rubric_id}/curate",
    CurateRubricRequest,
    RubricCurationResult,
)
CURATIONS = get("store_curations", "/v1/buffers/{question_id}/curations", CurationList)
SCORING_PUT = post("store_scoring_put", "/v1/scorings", ScoringIn, StoredScoring)
SCORINGS = get("store_scorings", "/v1/scorings", ScoringList, "question_id", "limit")
SCORING = get("store_scoring", "/v1/scorings/{scoring_id}", StoredScoring)
