"""The one HTTP client for service-to-service calls: retries with jitter, deadlines, wait-time
and LLM-usage accounting, and one mapping of upstream failures to the caller's error.

Every internal call goes through `ServiceClient`: the gateway to the model servers, the store
and the miner (JSON and streamed bodies), and the miner's workers to the model servers. An
internal route is an `Endpoint` value declared once (each capability's `endpoints` module)
and called with `ServiceClient.call`; path segments are escaped there, by `Endpoint.url_path`.
A failed call raises `UpstreamError`, which every service app maps to the caller's error once
(`upstream_failure`, registered by `common.app.create_service_app`): routes just await.

Deadlines (`common.deadlines`) bound every call; the wait clock, LLM usage and forwarded
headers of the request being served come from its `common.request_context`.
"""

import asyncio
import logging
import random
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel, ValidationError

from rubricate.common.auth import internal_headers
from rubricate.common.deadlines import DEADLINE_HEADER, current_deadline
from rubricate.common.errors import ServiceError
from rubricate.common.http_pool import ShardedClient
from rubricate.common.logging import forward_headers
from rubricate.common.metrics import UPSTREAM_ERRORS
from rubricate.common.request_context import WaitClock, current_context
from rubricate.common.usage import Usage
from rubricate_client.endpoints import Endpoint
from rubricate_client.schemas.common import UsageOut

T = TypeVar("T", bound=BaseModel)

log = logging.getLogger("rubricate.upstream")

RETRY_STATUSES = frozenset({503, 504})
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
"""Methods re-sent after a timeout; any other call that timed out after it was sent is not
re-sent (the upstream may still be working on it, e.g. a model-server task)."""
"""Statuses retried by default: the upstream is briefly unavailable, the call can be re-sent."""
MAX_BACKOFF_S = 8.0
BASE_BACKOFF_S = 0.25
CONNECT_HOLD_STEP_S = 1.0
"""The longest pause between tries while a call holds for an upstream that refuses
connections (`ServiceClient.connect_wait_s`): it is back within about this long of listening."""


class UpstreamError(Exception):
    """An upstream service failed; carries its status, error type, field and LLM usage."""

    def __init__(
        self,
        *,
        service: str,
        status: int | None,
        type: str,
        message: str,
        usage: UsageOut | None = None,
        field: str | None = None,
        not_connected: bool = False,
    ) -> None:
        super().__init__(f"{service}: {message}")
        self.service = service
        self.status = status
        self.type = type
        self.message = message
        self.usage = usage
        self.field = field
        self.not_connected = not_connected
        """No connection was made (refused, no route, a connect timeout): nothing was sent,
        so the call can be sent again whatever its method."""


def unreachable(exc: UpstreamError) -> bool:
    """The upstream service itself could not be reached (infrastructure: its process
    restarting, its pod replaced, the network), as opposed to an answer it gave. True for a
    transport failure with no answer (`upstream_unreachable`: refused, reset, no route); false
    for a call that timed out after it was sent (the upstream was working on it), a passed
    deadline, an invalid answer, and every status an upstream answered, 503
    `backend_unavailable` included (a model server reporting its judge backend down after
    its own retries: a judge failure, see docs/gateway.md, "Failures are never rewards")."""
    return exc.status is None and exc.type == "upstream_unreachable"


def upstream_failure(exc: UpstreamError) -> ServiceError:
    """The caller's error for a failed upstream call: the upstream's own 4xx passes through
    (the request was bad), a passed deadline is 504 `deadline_exceeded`, anything else is
    502/503 with Retry-After and the usage spent."""
    if exc.type == "deadline_exceeded":
        return ServiceError(504, exc.message, type=exc.type, usage=exc.usage)
    if exc.status is not None and 400 <= exc.status < 500 and exc.status != 429:
        return ServiceError(
            exc.status, exc.message, type=exc.type, field=exc.field, usage=exc.usage
        )
    what = "unreachable" if exc.status is None else "failed"
    return ServiceError(
        503 if exc.status in (None, 503) else 502,
        f"{exc.service} {what}: {exc.message}",
        type=exc.type,
        usage=exc.usage,
        headers={"Retry-After": "5"},
    )


def upstream_error(exc: Exception) -> ServiceError:
    """`upstream_failure` as an app-level error mapping (`common.app.create_service_app`)."""
    assert isinstance(exc, UpstreamError)
    return upstream_failure(exc)


def is_timeout(exc: httpx.TransportError) -> bool:
    """A timeout once the request may have reached the upstream (not a connect timeout)."""
    return isinstance(exc, httpx.TimeoutException) and not isinstance(exc, httpx.ConnectTimeout)


def backoff_s(attempt: int) -> float:
    """Exponential backoff with jitter (half to full of the step), capped."""
    step: float = BASE_BACKOFF_S * 2.0**attempt
    return min(MAX_BACKOFF_S, step) * (0.5 + random.random() / 2)


class ServiceClient:
    """One upstream service: a pooled httpx client with the platform's retry policy.

    Transport failures and `retry_statuses` are retried up to `retries` times with jittered
    exponential backoff (per call, `retry=False` turns that off, e.g. for a POST that must
    not run twice). A POST that timed out after it was sent is never re-sent: the upstream
    may still be running it (a model-server task would run twice). A `deadline`
    (time.monotonic() value; by default the deadline of the request being served,
    `current_deadline()`) bounds every attempt's timeout, is forwarded as the time left in
    `X-Rubricate-Deadline`, and stops retries once it has passed; a call it cuts short fails
    with type `deadline_exceeded`. `concurrency` caps the calls in flight (a number, or a
    semaphore shared with other clients).

    `connect_wait_s` (0: off) holds a call to an upstream that accepts no connection (a
    restarting model server) beyond `retries`: a try that could not connect is made again,
    at most `CONNECT_HOLD_STEP_S` apart, until that long has passed since the call's first
    try (and never past its deadline). Nothing was sent, so any method is safe to repeat.
    """

    def __init__(
        self,
        *,
        service: str,
        base_url: str,
        timeout_s: float,
        retries: int,
        retry_statuses: frozenset[int] = RETRY_STATUSES,
        concurrency: int | asyncio.Semaphore | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        connect_wait_s: float = 0.0,
    ) -> None:
        if retries < 0:
            raise ValueError(f"retries must be >= 0, got {retries}")
        if connect_wait_s < 0:
            raise ValueError(f"connect_wait_s must be >= 0, got {connect_wait_s}")
        self.connect_wait_s = connect_wait_s
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
        self.service = service
        self.retries = retries
        self.timeout_s = timeout_s
        self.retry_statuses = retry_statuses
        self._sem = (
            concurrency
            if isinstance(concurrency, asyncio.Semaphore)
            else asyncio.Semaphore(concurrency)
            if concurrency
            else None
        )
        self._pool = ShardedClient(  # hundreds in flight at a short pool walk each
            max_connections=512,
            max_keepalive_connections=256,
            base_url=base_url,
            timeout=httpx.Timeout(timeout_s, connect=min(timeout_s, 10.0)),
            transport=transport,
            headers=internal_headers(),
        )

    async def aclose(self) -> None:
        await self._pool.aclose()

    async def problem(self) -> str | None:
        """None when the service answers /healthz, else what is wrong."""
        try:
            response = await self._pool.next().get("/healthz", timeout=2.0)
        except httpx.HTTPError as exc:
            return f"{self.service}: {type(exc).__name__}"
        return (
            None if response.status_code == 200 else f"{self.service}: HTTP {response.status_code}"
        )

    async def send(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        content: bytes | None = None,
        params: Mapping[str, str] | None = None,
        headers: dict[str, str] | None = None,
        clock: WaitClock | None = None,
        retry: bool = True,
        stream: bool = False,
        deadline: float | None = None,
        usage: Usage | None = None,
    ) -> httpx.Response:
        """Send with retries; a response below 400 is returned (streamed: unread, the caller
        closes it), anything else raises `UpstreamError` with the upstream's error body.
        The LLM usage an error body reports is added to `usage` for every failed attempt,
        retried ones included (a failed model call was still paid for)."""
        ctx = current_context()
        if ctx is not None:
            clock = clock if clock is not None else ctx.clock
            usage = usage if usage is not None else ctx.usage
            headers = {**ctx.headers, **headers} if headers else ctx.headers
        sent_headers = forward_headers(headers)  # + X-Request-ID of the request being served
        if deadline is None:
            deadline = current_deadline()
        build = {"json": json, "content": content, "params": params, "headers": sent_headers}
        attempt = 0
        hold_until = time.monotonic() + self.connect_wait_s
        while True:
            outcome = await self._attempt(method, path, build, deadline, clock, stream)
            if isinstance(outcome, httpx.Response):
                return outcome
            error, final = outcome
            if usage is not None and error.usage is not None:
                usage.merge(error.usage)
            if final or not retry:
                raise error
            holding = error.not_connected and time.monotonic() < hold_until
            if attempt >= self.retries and not holding:
                raise error
            attempt += 1
            delay = backoff_s(attempt)
            if holding:  # the upstream is restarting: try again soon, until the hold ends
                delay = min(delay, CONNECT_HOLD_STEP_S, max(0.0, hold_until - time.monotonic()))
            if deadline is not None and time.monotonic() + delay >= deadline:
                raise error
            if attempt <= self.retries + 1:  # a hold logs its first try, not each one
                log.warning(
                    "upstream.retry service=%s path=%s attempt=%d holding=%s error=%s",
                    self.service,
                    path,
                    attempt,
                    holding and attempt > self.retries,
                    error,
                )
            await asyncio.sleep(delay)

    async def _attempt(
        self,
        method: str,
        path: str,
        build: dict[str, Any],
        deadline: float | None,
        clock: WaitClock | None,
        stream: bool,
    ) -> httpx.Response | tuple[UpstreamError, bool]:
        """One try: the response (below 400), or the error and whether it is final (not to
        be retried whatever the policy: a 4xx, a passed deadline, a sent POST that timed
        out)."""
        timeout = self._attempt_timeout(deadline)
        if deadline is not None:
            build["headers"][DEADLINE_HEADER] = f"{deadline - time.monotonic():.3f}"
        started = time.perf_counter()
        try:
            client = self._pool.next()
            request = client.build_request(method, path, timeout=timeout, **build)
            if self._sem is None:
                response = await client.send(request, stream=stream)
            else:
                async with self._sem:
                    response = await client.send(request, stream=stream)
        except httpx.TransportError as exc:
            if clock is not None:
                clock.add(started, time.perf_counter())
            return self._transport_error(exc, method, deadline)
        if clock is not None:
            clock.add(started, time.perf_counter())
        if response.status_code < 400:
            return response
        if stream:
            await response.aread()
            await response.aclose()
        error = error_from(self.service, response)
        if response.status_code >= 500:  # 4xx answers are for the caller to read
            UPSTREAM_ERRORS.labels(self.service, "status_5xx").inc()
        return error, response.status_code not in self.retry_statuses

    def _transport_error(
        self, exc: httpx.TransportError, method: str, deadline: float | None
    ) -> tuple[UpstreamError, bool]:
        UPSTREAM_ERRORS.labels(self.service, "unreachable").inc()
        if deadline is not None and time.monotonic() >= deadline:
            error = UpstreamError(
                service=self.service,
                status=None,
                type="deadline_exceeded",
                message=f"the request's deadline passed during the call ({exc!r})",
            )
            error.__cause__ = exc
            return error, True
        error = UpstreamError(
            service=self.service,
            status=None,
            type="upstream_timeout" if is_timeout(exc) else "upstream_unreachable",
            message=f"{type(exc).__name__}: {exc}",
            not_connected=isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout),
        )
        error.__cause__ = exc
        # a sent call that timed out: the upstream may still be doing the work, and
        # re-sending would do it twice
        return error, is_timeout(exc) and method.upper() not in SAFE_METHODS

    async def request(
        self,
        method: str,
        path: str,
        *,
        response_model: type[T],
        json: Any = None,
        params: Mapping[str, str] | None = None,
        headers: dict[str, str] | None = None,
        clock: WaitClock | None = None,
        retry: bool = True,
        deadline: float | None = None,
        usage: Usage | None = None,
    ) -> T:
        """A JSON call whose answer is validated as `response_model`; the LLM usage the answer
        (or a failed attempt's error) reports is added to `usage`, by default the current
        `request_context`'s."""
        if usage is None:
            ctx = current_context()
            usage = ctx.usage if ctx is not None else None
        response = await self.send(
            method,
            path,
            json=json,
            params=params,
            headers=headers,
            clock=clock,
            retry=retry,
            deadline=deadline,
            usage=usage,
        )
        try:
            out = response_model.model_validate_json(response.content)
        except ValidationError as exc:
            UPSTREAM_ERRORS.labels(self.service, "invalid_response").inc()
            raise UpstreamError(
                service=self.service,
                status=response.status_code,
                type="upstream_invalid_response",
                message=str(exc),
            ) from exc
        reported = getattr(out, "usage", None)
        if usage is not None and isinstance(reported, UsageOut):
            usage.merge(reported)
        return out

    async def call(
        self,
        endpoint: Endpoint[Any, T],
        body: BaseModel | Mapping[str, Any] | None = None,
        *,
        path: Mapping[str, str] | None = None,
        params: Mapping[str, str] | None = None,
        headers: dict[str, str] | None = None,
        retry: bool = True,
        deadline: float | None = None,
    ) -> T:
        """Call an internal route declared as `endpoint`: its path parameters from `path`
        (each segment escaped by `Endpoint.url_path`), `body` sent as JSON, the answer
        validated as the endpoint's response model. Usage, clock and headers of the current
        `request_context` are accounted."""
        json = body.model_dump(mode="json") if isinstance(body, BaseModel) else body
        return await self.request(
            endpoint.method,
            endpoint.url_path(dict(path or {})),
            response_model=endpoint.response,
            json=json,
            params=params,
            headers=headers,
            retry=retry,
            deadline=deadline,
        )

    async def task(
        self,
        path: str,
        body: BaseModel,
        *,
        response_model: type[T],
        usage: Usage,
        clock: WaitClock | None = None,
        deadline: float | None = None,
    ) -> T:
        """A model-server task (POST); its LLM usage is added to `usage` whether it works or
        not (a failed call was still paid for)."""
        return await self.request(
            "POST",
            path,
            json=body.model_dump(mode="json"),
            response_model=response_model,
            clock=clock,
            deadline=deadline,
            usage=usage,
        )

    async def stream(
        self,
        method: str,
        path: str,
        *,
        headers: dict[str, str] | None = None,
        params: Mapping[str, str] | None = None,
    ) -> AsyncIterator[bytes]:
        """A raw body, chunk by chunk. The status is checked before this returns: an
        `UpstreamError` is raised before the first chunk when the upstream refuses."""
        response = await self.send(method, path, headers=headers, params=params, stream=True)

        async def chunks() -> AsyncIterator[bytes]:
            try:
                async for chunk in response.aiter_bytes():
                    yield chunk
            finally:
                await response.aclose()

        return chunks()

    def _attempt_timeout(self, deadline: float | None) -> httpx.Timeout:
        total = self.timeout_s
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise UpstreamError(
                    service=self.service,
                    status=None,
                    type="deadline_exceeded",
                    message="the request's deadline passed before the call",
                )
            total = min(total, left)
        return httpx.Timeout(total, connect=min(total, 10.0))


@dataclass
class Upstreams:
    """The gateway's clients, one per upstream service (the miner's is optional)."""

    generator: ServiceClient
    verifier: ServiceClient
    store: ServiceClient
    miner: ServiceClient | None = None

    def all(self) -> list[ServiceClient]:
        return [self.generator, self.verifier, self.store] + (
            [self.miner] if self.miner is not None else []
        )

    async def aclose(self) -> None:
        for client in self.all():
            await client.aclose()


def error_from(service: str, response: httpx.Response) -> UpstreamError:
    """An upstream's error response, read in the one error shape where it has it."""
    try:
        body = response.json()["error"]
        usage = UsageOut.model_validate(body["usage"]) if body.get("usage") else None
        field_ = body.get("field")
        return UpstreamError(
            service=service,
            status=response.status_code,
            type=str(body.get("type") or "upstream_error"),
            message=str(body.get("message", response.text[:500])),
            usage=usage,
            field=str(field_) if field_ is not None else None,
        )
    except (ValueError, KeyError, TypeError, AttributeError, ValidationError):
        return UpstreamError(
            service=service,
            status=response.status_code,
            type="upstream_error",
            message=response.text[:500],
        )
