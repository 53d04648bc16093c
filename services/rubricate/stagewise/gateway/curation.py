"""Rubric curation and the question list through the gateway: the store's routes, called
with the caller's tenant; the author of a change is named by the gateway, never the caller."""

from urllib.parse import quote

from rubricate.common.tenancy import TENANT_HEADER
from rubricate.common.upstream import ServiceClient
from rubricate.stagewise.store.schemas import CurateRubricRequest, QuestionQuery
from rubricate_client.schemas.buffers import QuestionList, RubricCurationResult
from rubricate_client.schemas.curation import CurationList, RubricCurationRequest


def _segment(value: str) -> str:
    return quote(value, safe="")


class BufferCuration:
    """The store's curation and question-list routes. Upstream 4xx (404, 409) pass through;
    only reads are retried (a curation is not repeated)."""

    def __init__(self, store: ServiceClient) -> None:
        self.store = store

    async def list_questions(self, query: QuestionQuery, *, tenant: str) -> QuestionList:
        params = {"sort": query.sort, "offset": str(query.offset), "limit": str(query.limit)}
        if query.search is not None:
            params["search"] = query.search
        return await self.store.request(
                "GET",
                "/v1/buffers",
                params=params,
                response_model=QuestionList,
                headers={TENANT_HEADER: tenant},
            )

    async def curate(
        self,
        question_id: str,
        rubric_id: str,
        request: RubricCurationRequest,
        *,
        author: str,
        tenant: str,
    ) -> RubricCurationResult:
        body = CurateRubricRequest.model_validate({**request.model_dump(), "author": author})
        return await self.store.request(
                "POST",
                f"/v1/buffers/{_segment(question_id)}/rubrics/{_segment(rubric_id)}/curate",
                json=body.model_dump(mode="json"),
                response_model=RubricCurationResult,
                headers={TENANT_HEADER: tenant},
                retry=False,
            )

    async def curations(self, question_id: str, *, tenant: str) -> CurationList:
        return await self.store.request(
                "GET",
                f"/v1/buffers/{_segment(question_id)}/curations",
                response_model=CurationList,
                headers={TENANT_HEADER: tenant},
            )
