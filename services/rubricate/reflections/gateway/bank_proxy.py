"""Bank snapshot export/import through the gateway: JSONL streamed to and from the store's
routes (`reflections.store.endpoints.SNAPSHOT_EXPORT`, `SNAPSHOT_IMPORT`) over its
`ServiceClient` as raw bodies, answered as the gateway's responses (the JSON bank routes
are forwarded by `common.forward`)."""

from fastapi.responses import Response, StreamingResponse

from rubricate.common.tenancy import TENANT_HEADER
from rubricate.common.upstream import ServiceClient
from rubricate.reflections.store.endpoints import SNAPSHOT_EXPORT, SNAPSHOT_IMPORT


class BankProxy:
    def __init__(self, store: ServiceClient) -> None:
        self.store = store

    async def export(self, *, tenant: str, step: int) -> StreamingResponse:
        """The snapshot's JSONL as a download, chunk by chunk; an UpstreamError before the
        first chunk when the store refuses (404: no such snapshot)."""
        chunks = await self.store.stream(
            SNAPSHOT_EXPORT.method,
            SNAPSHOT_EXPORT.url_path({"step": str(step)}),
            headers={TENANT_HEADER: tenant},
        )
        return StreamingResponse(
            chunks,
            media_type="application/x-ndjson",
            headers={"Content-Disposition": f'attachment; filename="bank-step-{step}.jsonl"'},
        )

    async def import_(self, *, tenant: str, body: bytes, replace: bool) -> Response:
        """The store's answer as it is (status and JSON body). Not retried: a second import
        of the same snapshot would be refused (409)."""
        answer = await self.store.send(
            SNAPSHOT_IMPORT.method,
            SNAPSHOT_IMPORT.url_path({}),
            content=body,
            params={"replace": str(replace).lower()},
            headers={TENANT_HEADER: tenant, "content-type": "application/x-ndjson"},
            retry=False,
        )
        return Response(
            content=answer.content, status_code=answer.status_code, media_type="application/json"
        )
