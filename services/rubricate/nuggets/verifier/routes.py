"""The verifier's nugget-label task route (a model failure is answered by the model server's
one `LLMError` handler, named after the route: `nugget_verification`)."""

from rubricate.llm.server import TaskRoute, task_router
from rubricate.nuggets.verifier.endpoints import NUGGET_LABELS
from rubricate.nuggets.verifier.service import NuggetLabelService

SERVICE_NAME = "nugget_labels"
"""The attribute of `app.state` holding the `NuggetLabelService`."""

router = task_router(SERVICE_NAME, TaskRoute(NUGGET_LABELS, NuggetLabelService.label))
