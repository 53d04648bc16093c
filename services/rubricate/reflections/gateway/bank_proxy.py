"""Bank snapshot export/import through the gateway: JSONL streamed to and from the store,
over the store's `ServiceClient` (raw bodies; the JSON bank routes use `request`)."""

from collections.abc import AsyncIterator

import httpx

from rubricate.common.tenancy import TENANT_HEADER
from rubricate.common.upstream import ServiceClient


class BankProxy:
    def __init__(self, store: ServiceClient) -> None:
        self.store = store

    async def export(self, *, tenant: str, step: int) -> AsyncIterator[bytes]:
        """The snapshot's JSONL, chunk by chunk; an UpstreamError before the first chunk
        when the store refuses (404: no such snapshot)."""
        return await self.store.stream(
            "GET", f"/v1/bank/snapshots/{step}/export", headers={TENANT_HEADER: tenant}
        )

    async def import_(self, *, tenant: str, body: bytes, replace: bool) -> httpx.Response:
        """Not retried: a second import of the same snapshot would be refused (409)."""
        return await self.store.send(
            "POST",
            "/v1/bank/snapshots/import",
            content=body,
            params={"replace": str(replace).lower()},
            headers={TENANT_HEADER: tenant, "content-type": "application/x-ndjson"},
            retry=False,
        )
