"""The tenant scope of a request, the same way in every service.

With an API key the key decides the tenant (see `common.auth`); a service calling another
forwards the tenant in `X-Rubricate-Tenant`; in open (embedded) mode that header is trusted and
defaults to `default`.
"""

from typing import Annotated

from fastapi import Depends, Header, Request

from rubricate.common.auth import authenticated_tenant
from rubricate_client.headers import DEFAULT_TENANT, TENANT_HEADER, TENANT_LEN, TENANT_PATTERN

__all__ = ["DEFAULT_TENANT", "TENANT_HEADER", "TENANT_LEN", "TENANT_PATTERN", "TenantDep"]


async def resolve_tenant(  # async: no thread-pool hop per request (`common.routing`)
    request: Request,
    header: Annotated[
        str | None,
        Header(
            alias=TENANT_HEADER,
            min_length=1,
            max_length=TENANT_LEN,
            pattern=TENANT_PATTERN,
            description="Tenant scope; with an API key it must match the key's tenant.",
        ),
    ] = None,
) -> str:
    return authenticated_tenant(request) or header or DEFAULT_TENANT


TenantDep = Annotated[str, Depends(resolve_tenant)]
