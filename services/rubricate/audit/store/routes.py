"""The store's rubric-history routes (declared in `audit.store.endpoints`; the buffer's
tables are the store's)."""

import asyncio
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Path, Request
from fastapi.responses import StreamingResponse
from sqlalchemy import Engine

from rubricate.audit.store.endpoints import BUFFER_HISTORY, HISTORY_EXPORT
from rubricate.audit.store.repository import question_history, tenant_history
from rubricate.common.routing import found, route
from rubricate.common.tenancy import TenantDep
from rubricate.db.limits import QUESTION_ID_LEN
from rubricate_client.schemas.audit import RubricHistory

router = APIRouter(tags=["audit"])

QuestionPath = Annotated[str, Path(min_length=1, max_length=QUESTION_ID_LEN)]


def _engine(request: Request) -> Engine:
    engine: Engine = request.app.state.engine
    return engine


@route(router, BUFFER_HISTORY, summary="Every rubric that was ever in the question's buffer")
async def history(
    question_id: QuestionPath, request: Request, tenant: TenantDep = "default"
) -> RubricHistory:
    rubrics = await asyncio.to_thread(question_history, _engine(request), tenant, question_id)
    message = f"no rubric buffer for question {question_id!r}"
    return RubricHistory(question_id=question_id, rubrics=found(rubrics, message))


@router.get(
    HISTORY_EXPORT.path,
    response_class=StreamingResponse,
    summary="The tenant's rubric history as JSONL",
)
async def export(request: Request, tenant: TenantDep = "default") -> StreamingResponse:
    engine = _engine(request)

    async def lines() -> AsyncIterator[bytes]:
        batches = tenant_history(engine, tenant)
        while True:
            batch = await asyncio.to_thread(next, batches, None)
            if batch is None:
                return
            yield "".join(entry.model_dump_json() + "\n" for entry in batch).encode()

    return StreamingResponse(
        lines(),
        media_type="application/x-ndjson",
        headers={"Content-Disposition": 'attachment; filename="rubric-history.jsonl"'},
    )
