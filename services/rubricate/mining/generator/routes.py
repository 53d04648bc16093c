"""Routes of the rubric-generator's nugget-mining tasks (declared in
`mining.generator.endpoints`; a model failure is answered by the model server's one `LLMError`
handler, named after the route: the task's label)."""

from rubricate.llm.server import TaskRoute, task_router
from rubricate.mining.generator.endpoints import (
    NUGGET_EXTRACTION,
    NUGGET_IMPORTANCE,
    NUGGET_MERGE,
    QUERY_REWRITES,
)
from rubricate.mining.generator.service import MiningGenerationService as Service

SERVICE_NAME = "mining"
"""Name of the service object on `app.state` (one of the model server's task services)."""

router = task_router(
    SERVICE_NAME,
    TaskRoute(QUERY_REWRITES, Service.query_rewrites),
    TaskRoute(NUGGET_EXTRACTION, Service.extract),
    TaskRoute(NUGGET_MERGE, Service.merge),
    TaskRoute(NUGGET_IMPORTANCE, Service.importance),
    tags=["mining tasks"],
)
