"""The stagewise model-server tasks as typed endpoint values, declared once: the verifier's
and generator's route decorators take their paths from here, and the gateway and the audit
call them with `ServiceClient.call(ENDPOINT, body)`. Imports only task schemas (model servers
import it; the store's routes are in `stagewise.store.endpoints`)."""

from rubricate.stagewise.generator.schemas import StageRubricsRequest, StageRubricsResponse
from rubricate.stagewise.verifier.schemas import StageScoresRequest, StageScoresResponse
from rubricate_client.endpoints import Endpoint

STAGE_SCORES = Endpoint(
    name="stage_scoring",
    method="POST",
    path="/v1/tasks/stage-scores",
    request=StageScoresRequest,
    response=StageScoresResponse,
    rpc=None,
)
"""The verifier scores every rollout of a group against the stage rubrics."""

STAGE_RUBRICS = Endpoint(
    name="stage_rubric_generation",
    method="POST",
    path="/v1/tasks/stage-rubrics",
    request=StageRubricsRequest,
    response=StageRubricsResponse,
    rpc=None,
)
"""The generator proposes new rubrics per stage from a contrasting group."""
