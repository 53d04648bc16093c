"""The gateway's SIGTERM hold: a draining replica that is the only live one serves on.

A replica that drains hands the `/get_reward` groups it gathers over to another replica and
answers its other waiting callers a retryable 503 (`Rendezvous.drain`). With no other live
replica that hand-over has nobody to go to: the retries meet a closed port until the
replica is back, and a client that gives up after a few quick tries (OpenRLHF: 5 tries 1 s
apart) loses its samples (issue 33: 16 samples of a 4,096-rollout step). So before the
server stops taking connections, the gateway's drain holds (`common.app.Drain.holds`):

- another replica is live (the rendezvous's replica registry in Redis): no hold, the
  hand-over as before;
- it is the only one (or the rendezvous is in process, embedded mode): it keeps listening,
  joining and scoring as usual until it is idle (no HTTP request in flight besides the
  probes, no group led or waited on) for `quiet_s`, at most `hold_s`; a replica that becomes
  live meanwhile ends the hold (the hand-over then goes to it). `/readyz` says `draining`
  throughout.

Then the server stops listening and the drain's hooks run (nothing is left to hand over
unless the hold ran out)."""

import asyncio
import logging
import time

from starlette.types import ASGIApp, Receive, Scope, Send

from rubricate.common.rendezvous import Rendezvous

log = logging.getLogger("rubricate.gateway.drain")

PROBE_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})
"""Requests that do not keep a draining replica busy (a probe arrives every few seconds)."""
POLL_S = 0.1
"""How often the hold looks at its replica's state."""
PEER_CHECK_S = 1.0
"""How often the hold asks whether another replica has become live."""


class InFlight:
    """The HTTP requests of this replica in progress (not the probes), and since when it
    has had none."""

    def __init__(self) -> None:
        self.count = 0
        self.idle_since = time.monotonic()

    def enter(self) -> None:
        self.count += 1

    def leave(self) -> None:
        self.count -= 1
        if self.count == 0:
            self.idle_since = time.monotonic()

    def idle_for(self) -> float:
        """Seconds without a request in flight (0 while one is)."""
        return 0.0 if self.count else time.monotonic() - self.idle_since


class InFlightMiddleware:
    """Counts the requests in flight into `in_flight` (outermost: from the first byte)."""

    def __init__(self, app: ASGIApp, *, in_flight: InFlight) -> None:
        self.app = app
        self.in_flight = in_flight

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path") in PROBE_PATHS:
            await self.app(scope, receive, send)
            return
        self.in_flight.enter()
        try:
            await self.app(scope, receive, send)
        finally:
            self.in_flight.leave()


async def serve_on_while_alone(
    rendezvous: Rendezvous, in_flight: InFlight, *, quiet_s: float, hold_s: float
) -> None:
    """Return when the server may stop taking connections: at once when another replica is
    live (or `hold_s` is 0); else once this replica has been idle for `quiet_s`, another
    replica has become live, or `hold_s` has passed."""
    if hold_s <= 0 or not await rendezvous.alone():
        log.info("gateway.drain_hand_over peers=live")
        return
    began = time.monotonic()
    log.info(
        "gateway.drain_serving_on reason=only_live_replica in_flight=%d quiet_s=%g hold_s=%g",
        in_flight.count,
        quiet_s,
        hold_s,
    )
    asked = began
    while True:
        now = time.monotonic()
        if not rendezvous.busy and in_flight.idle_for() >= quiet_s:
            log.info("gateway.drain_idle held_s=%.1f", now - began)
            return
        if now - began >= hold_s:
            log.warning(
                "gateway.drain_hold_ran_out held_s=%.1f in_flight=%d busy=%s",
                now - began,
                in_flight.count,
                rendezvous.busy,
            )
            return
        if now - asked >= PEER_CHECK_S:
            asked = now
            if not await rendezvous.alone():
                log.info("gateway.drain_hand_over peers=started held_s=%.1f", now - began)
                return
        await asyncio.sleep(POLL_S)
