"""The one forwarder of the gateway's pure proxy routes: a public route whose whole work is
to call an internal route for the caller's tenant and answer what it answers.

A route's dependency makes a `Forwarder(client, tenant)` (the upstream's `ServiceClient`, the
caller's tenant); the route's body is then one line,
`return await upstream(ENDPOINT, path=..., query=..., body=...)`: the internal route declared
as `ENDPOINT` is called with the tenant header (path segments escaped by `Endpoint.url_path`)
and its answer comes back validated as the endpoint's response model. A failed call raises
`UpstreamError`, which every service app maps once (`upstream_failure`).

`StoreDep` and `MinerDep` are those dependencies for the gateway's store and miner (its
upstream clients on `app.state.upstreams`)."""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

from fastapi import Depends, Request
from pydantic import BaseModel

from rubricate.common.errors import ServiceError
from rubricate.common.tenancy import TENANT_HEADER, TenantDep
from rubricate.common.upstream import ServiceClient, Upstreams
from rubricate_client.endpoints import Endpoint

T = TypeVar("T", bound=BaseModel)

QueryValue = str | int | None


@dataclass(frozen=True)
class Forwarder:
    """Calls internal routes on `client` on behalf of `tenant`."""

    client: ServiceClient
    tenant: str

    async def __call__(
        self,
        endpoint: Endpoint[Any, T],
        *,
        path: Mapping[str, str] | None = None,
        query: Mapping[str, QueryValue] | None = None,
        body: BaseModel | Mapping[str, Any] | None = None,
        retry: bool = True,
    ) -> T:
        """The answer of `endpoint`, validated. `path`: its path parameters; `query`: query
        parameters in order, each sent as text, left out when None; `body`: sent as JSON;
        `retry=False` for a call that must not run twice."""
        params = {name: str(value) for name, value in (query or {}).items() if value is not None}
        return await self.client.call(
            endpoint,
            body,
            path=path,
            params=params or None,
            headers={TENANT_HEADER: self.tenant},
            retry=retry,
        )


def upstreams(request: Request) -> Upstreams:
    """The gateway's upstream clients (built in its lifespan)."""
    clients: Upstreams = request.app.state.upstreams
    return clients


def miner_client(request: Request) -> ServiceClient:
    """The miner's client; a 503 when the gateway has no miner configured."""
    client = upstreams(request).miner
    if client is None:
        raise ServiceError(503, "no miner is configured", type="upstream_unreachable")
    return client


def miner_forwarder(
    client: Annotated[ServiceClient, Depends(miner_client)], tenant: TenantDep = "default"
) -> Forwarder:
    """The miner's routes, called for the caller's tenant."""
    return Forwarder(client, tenant)


def store_forwarder(request: Request, tenant: TenantDep = "default") -> Forwarder:
    """The store's routes, called for the caller's tenant. Upstream 4xx (404, 409) pass
    through; only reads are retried."""
    return Forwarder(upstreams(request).store, tenant)


MinerDep = Annotated[Forwarder, Depends(miner_forwarder)]
StoreDep = Annotated[Forwarder, Depends(store_forwarder)]
