"""HTTP headers and tenant names of the public API."""

from typing import Final

TENANT_HEADER: Final = "X-Rubricate-Tenant"
"""The tenant scope of a request (with an API key, the key decides and this must match)."""
DEFAULT_TENANT: Final = "default"
TENANT_LEN: Final = 64
TENANT_PATTERN: Final = r"^[A-Za-z0-9_.\-]+$"
IDEMPOTENCY_HEADER: Final = "Idempotency-Key"
