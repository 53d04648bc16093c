"""Bank snapshot export/import through the gateway: JSONL streamed to and from the store."""

from collections.abc import AsyncIterator

import httpx

from rubricate.common.auth import internal_headers
from rubricate.common.logging import forward_headers
from rubricate.common.tenancy import TENANT_HEADER
from rubricate.gateway.clients import UpstreamError
from rubricate.gateway.settings import GatewaySettings


class BankProxy:
    """Raw (non-JSON) store calls; JSON ones go through the gateway's ServiceClient."""

    def __init__(
        self, settings: GatewaySettings, *, transport: httpx.AsyncBaseTransport | None = None
    ) -> None:
        self._client = httpx.AsyncClient(
            base_url=settings.store_url,
            timeout=httpx.Timeout(settings.store_timeout_s, connect=10.0),
            transport=transport,
            headers=internal_headers(),
        )

    async def aclose(self) -> None:
        await self._client.aclose()

    async def export(self, *, tenant: str, step: int) -> AsyncIterator[bytes]:
        """The snapshot's JSONL, chunk by chunk; an UpstreamError before the first chunk
        when the store refuses (404: no such snapshot)."""
        request = self._client.build_request(
            "GET",
            f"/v1/bank/snapshots/{step}/export",
            headers=forward_headers({TENANT_HEADER: tenant}),
        )
        try:
            response = await self._client.send(request, stream=True)
        except httpx.TransportError as exc:
            raise _unreachable(exc) from exc
        if response.status_code >= 400:
            await response.aread()
            await response.aclose()
            raise _error(response)

        async def chunks() -> AsyncIterator[bytes]:
            try:
                async for chunk in response.aiter_bytes():
                    yield chunk
            finally:
                await response.aclose()

        return chunks()

    async def import_(self, *, tenant: str, body: bytes, replace: bool) -> httpx.Response:
        try:
            response = await self._client.post(
                "/v1/bank/snapshots/import",
                content=body,
                params={"replace": str(replace).lower()},
                headers=forward_headers(
                    {TENANT_HEADER: tenant, "content-type": "application/x-ndjson"}
                ),
            )
        except httpx.TransportError as exc:
            raise _unreachable(exc) from exc
        if response.status_code >= 400:
            raise _error(response)
        return response


def _unreachable(exc: httpx.TransportError) -> UpstreamError:
    return UpstreamError(
        service="store",
        status=None,
        type="upstream_unreachable",
        message=f"{type(exc).__name__}: {exc}",
    )


def _error(response: httpx.Response) -> UpstreamError:
    try:
        body = response.json()["error"]
        return UpstreamError(
            service="store",
            status=response.status_code,
            type=str(body.get("type", "upstream_error")),
            message=str(body.get("message", "")),
        )
    except (ValueError, KeyError, TypeError):
        return UpstreamError(
            service="store",
            status=response.status_code,
            type="upstream_error",
            message=response.text[:500],
        )
