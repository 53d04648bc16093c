"""The tenant scope every service reads from the same header (API-key auth comes later)."""

from typing import Annotated, Final

from fastapi import Header

TENANT_HEADER: Final = "X-Rubricate-Tenant"
TENANT_LEN: Final = 64
TENANT_PATTERN: Final = r"^[A-Za-z0-9_.\-]+$"

TenantDep = Annotated[
    str,
    Header(
        alias=TENANT_HEADER,
        min_length=1,
        max_length=TENANT_LEN,
        pattern=TENANT_PATTERN,
        description="Tenant scope (authentication arrives with API keys).",
    ),
]
