"""Requests in flight per tenant on one gateway replica: over the limit is a 429 at once.

A trainer that floods the gateway gets `Retry-After` instead of queueing behind itself and
starving other tenants; health, readiness and metrics are never limited.
"""

from collections import defaultdict

from fastapi import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from rubricate.common.auth import OPEN_PATHS, is_own_session, scope_tenant
from rubricate.common.errors import error_json
from rubricate.common.metrics import TENANT_THROTTLED


class TenantConcurrencyMiddleware:
    def __init__(self, app: ASGIApp, *, max_in_flight: int, retry_after_s: int = 1) -> None:
        if max_in_flight < 1:
            raise ValueError("max_in_flight must be at least 1")
        self.app = app
        self.max_in_flight = max_in_flight
        self.retry_after_s = retry_after_s
        self.in_flight: defaultdict[str, int] = defaultdict(int)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in OPEN_PATHS or is_own_session(scope):
            await self.app(scope, receive, send)
            return
        tenant = scope_tenant(scope)
        if self.in_flight[tenant] >= self.max_in_flight:
            TENANT_THROTTLED.inc()
            response = error_json(
                Request(scope, receive),
                429,
                type="too_many_requests",
                message=(
                    f"tenant {tenant!r} already has {self.max_in_flight} requests in flight "
                    "on this gateway; retry after the given delay"
                ),
                headers={"Retry-After": str(self.retry_after_s)},
            )
            await response(scope, receive, send)
            return
        self.in_flight[tenant] += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.in_flight[tenant] -= 1
            if not self.in_flight[tenant]:
                del self.in_flight[tenant]
