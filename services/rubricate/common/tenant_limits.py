"""Admission on one gateway replica: a budget of pending rollouts per tenant.

A rollout waiting for its group or for the judge costs a coroutine and its text, not a worker,
so work queues until the tenant's pending rollouts reach the budget; past it a request is
refused at once with 429 and `Retry-After` (never queued without bound, never a reward).

- Every request holds one unit from its start to its end (the middleware, before the body is
  read); a route that learns its size takes the rest of its rollouts with
  `admit_rollouts(request, n)` (`/get_reward`: its samples; stagewise scoring: its rollouts).
- The default budget (`RUBRICATE_GATEWAY_MAX_IN_FLIGHT_PER_TENANT`, 16,384) holds four steps
  of 256 prompts x 16 samples sent one sample per request (OpenRLHF), so a trainer that never
  retries a 429 within its timeout does not meet one within a step.
- A request larger than the whole budget is admitted when it is its tenant's only one.
- Health, readiness and metrics are never limited; the console's own pages neither.
"""

from collections import defaultdict
from typing import Final

from fastapi import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from rubricate.common.auth import OPEN_PATHS, is_own_session, scope_tenant
from rubricate.common.errors import ServiceError, error_json
from rubricate.common.metrics import PENDING_ROLLOUTS, TENANT_THROTTLED

DEFAULT_PENDING_ROLLOUTS: Final = 16_384
"""Rollouts in flight per tenant on one replica: four 4,096-rollout steps."""
TICKET: Final = "rubricate.admission"
"""Where a request's `Ticket` is kept in the ASGI scope's state."""


class Admission:
    """Pending rollouts by tenant, against one budget."""

    def __init__(self, *, budget: int, retry_after_s: int = 1) -> None:
        if budget < 1:
            raise ValueError("the pending-rollout budget must be at least 1")
        self.budget = budget
        self.retry_after_s = retry_after_s
        self.pending: defaultdict[str, int] = defaultdict(int)

    def refusal(self, tenant: str, n: int, *, own: int = 0) -> str | None:
        """Why `n` more rollouts of `tenant` cannot be admitted now, or None; `own`: what the
        asking request already holds. A request larger than the whole budget is admitted
        when it is the tenant's only one (a small budget never refuses it for good)."""
        others = self.pending[tenant] - own
        if others + own + n <= self.budget or others <= 0:
            return None
        return (
            f"tenant {tenant!r} already has {self.pending[tenant]} rollouts pending on this "
            f"gateway (budget {self.budget}); {n} more do not fit: retry after the given delay"
        )

    def take(self, tenant: str, n: int) -> None:
        self.pending[tenant] += n
        PENDING_ROLLOUTS.inc(n)

    def give_back(self, tenant: str, n: int) -> None:
        self.pending[tenant] -= n
        PENDING_ROLLOUTS.dec(n)
        if self.pending[tenant] <= 0:
            del self.pending[tenant]


class Ticket:
    """One request's share of its tenant's budget."""

    def __init__(self, admission: Admission, tenant: str) -> None:
        self.admission = admission
        self.tenant = tenant
        self.held = 0

    def extend_to(self, n: int) -> None:
        """Hold `n` rollouts in all (a request holds 1 from its start); 429 when they do not
        fit the budget."""
        more = n - self.held
        if more <= 0:
            return
        why = self.admission.refusal(self.tenant, more, own=self.held)
        if why is not None:
            TENANT_THROTTLED.inc()
            raise ServiceError(
                429,
                why,
                type="too_many_requests",
                headers={"Retry-After": str(self.admission.retry_after_s)},
            )
        self.admission.take(self.tenant, more)
        self.held = n

    def release(self) -> None:
        if self.held:
            self.admission.give_back(self.tenant, self.held)
            self.held = 0


def admit_rollouts(request: Request, n: int) -> None:
    """Count the request as `n` rollouts against its tenant's budget (429 when they do not
    fit). A no-op on an app without the admission middleware (the model servers, tests)."""
    ticket = request.scope.get("state", {}).get(TICKET)
    if isinstance(ticket, Ticket):
        ticket.extend_to(n)


class TenantConcurrencyMiddleware:
    """Admits each request as one pending rollout of its tenant (see the module)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        max_in_flight: int = DEFAULT_PENDING_ROLLOUTS,
        retry_after_s: int = 1,
    ) -> None:
        self.app = app
        self.admission = Admission(budget=max_in_flight, retry_after_s=retry_after_s)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in OPEN_PATHS or is_own_session(scope):
            await self.app(scope, receive, send)
            return
        ticket = Ticket(self.admission, scope_tenant(scope))
        try:
            ticket.extend_to(1)
        except ServiceError as exc:
            response = error_json(
                Request(scope, receive),
                exc.status_code,
                type=exc.type,
                message=exc.message,
                headers=exc.headers,
            )
            await response(scope, receive, send)
            return
        scope.setdefault("state", {})[TICKET] = ticket
        try:
            await self.app(scope, receive, send)
        finally:
            ticket.release()
