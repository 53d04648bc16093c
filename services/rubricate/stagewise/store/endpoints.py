"""The store's rubric-buffer routes as typed endpoint values, declared once: the store's
route decorators take their paths from here, and the gateway and the audit call them with
`ServiceClient.call(ENDPOINT, body, path={...})` (segments escaped by `Endpoint.url_path`)."""

from rubricate.stagewise.store.schemas import (
    AddRubricsRequest,
    CurateRubricRequest,
    PruneRequest,
    PruneResponse,
    ScoringIn,
)
from rubricate_client.endpoints import Endpoint, NoBody
from rubricate_client.schemas.buffers import BufferView, QuestionList, RubricCurationResult
from rubricate_client.schemas.curation import CurationList
from rubricate_client.schemas.scorings import ScoringList, StoredScoring

BUFFER = Endpoint(
    name="store_buffer",
    method="GET",
    path="/v1/buffers/{question_id}",
    request=NoBody,
    response=BufferView,
    rpc=None,
)
BUFFER_ADD_RUBRICS = Endpoint(
    name="store_add_rubrics",
    method="POST",
    path="/v1/buffers/{question_id}/rubrics",
    request=AddRubricsRequest,
    response=BufferView,
    rpc=None,
)
BUFFER_PRUNE = Endpoint(
    name="store_prune",
    method="POST",
    path="/v1/buffers/{question_id}/prune",
    request=PruneRequest,
    response=PruneResponse,
    rpc=None,
)
QUESTIONS = Endpoint(
    name="store_questions",
    method="GET",
    path="/v1/buffers",
    request=NoBody,
    response=QuestionList,
    rpc=None,
    query_params=("search", "sort", "offset", "limit"),
)
RUBRIC_CURATE = Endpoint(
    name="store_curate_rubric",
    method="POST",
    path="/v1/buffers/{question_id}/rubrics/{rubric_id}/curate",
    request=CurateRubricRequest,
    response=RubricCurationResult,
    rpc=None,
)
CURATIONS = Endpoint(
    name="store_curations",
    method="GET",
    path="/v1/buffers/{question_id}/curations",
    request=NoBody,
    response=CurationList,
    rpc=None,
)
SCORING_PUT = Endpoint(
    name="store_scoring_put",
    method="POST",
    path="/v1/scorings",
    request=ScoringIn,
    response=StoredScoring,
    rpc=None,
)
SCORINGS = Endpoint(
    name="store_scorings",
    method="GET",
    path="/v1/scorings",
    request=NoBody,
    response=ScoringList,
    rpc=None,
    query_params=("question_id", "limit"),
)
SCORING = Endpoint(
    name="store_scoring",
    method="GET",
    path="/v1/scorings/{scoring_id}",
    request=NoBody,
    response=StoredScoring,
    rpc=None,
)
