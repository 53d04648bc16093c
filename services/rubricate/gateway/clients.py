"""HTTP clients for the gateway's upstream services, with retries and wait-time accounting."""

import asyncio
import random
import time
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel, ValidationError

from rubricate.common.auth import internal_headers
from rubricate.common.logging import forward_headers
from rubricate.common.metrics import UPSTREAM_ERRORS
from rubricate.common.schemas import UsageOut

T = TypeVar("T", bound=BaseModel)

_RETRY_STATUS = frozenset({503, 504})


class UpstreamError(Exception):
    """An upstream service failed; carries its status, error type and LLM usage if any."""

    def __init__(
        self,
        *,
        service: str,
        status: int | None,
        type: str,
        message: str,
        usage: UsageOut | None = None,
    ) -> None:
        super().__init__(f"{service}: {message}")
        self.service = service
        self.status = status
        self.type = type
        self.message = message
        self.usage = usage


class WaitClock:
    """Union of the wall-clock intervals a request spent waiting on upstream services."""

    def __init__(self) -> None:
        self._intervals: list[tuple[float, float]] = []

    def add(self, start: float, end: float) -> None:
        self._intervals.append((start, end))

    def total(self) -> float:
        total = 0.0
        cur_start = cur_end = None
        for start, end in sorted(self._intervals):
            if cur_end is None or start > cur_end:
                if cur_end is not None and cur_start is not None:
                    total += cur_end - cur_start
                cur_start, cur_end = start, end
            else:
                cur_end = max(cur_end, end)
        if cur_end is not None and cur_start is not None:
            total += cur_end - cur_start
        return total


class ServiceClient:
    def __init__(
        self,
        *,
        service: str,
        base_url: str,
        timeout_s: float,
        retries: int,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.service = service
        self.retries = retries
        self._client = httpx.AsyncClient(
            base_url=base_url,
            timeout=httpx.Timeout(timeout_s, connect=min(timeout_s, 10.0)),
            limits=httpx.Limits(max_connections=200, max_keepalive_connections=50),
            transport=transport,
            headers=internal_headers(),
        )

    async def aclose(self) -> None:
        await self._client.aclose()

    async def problem(self) -> str | None:
        """None when the service answers /healthz, else what is wrong."""
        try:
            response = await self._client.get("/healthz", timeout=2.0)
        except httpx.HTTPError as exc:
            return f"{self.service}: {type(exc).__name__}"
        return (
            None if response.status_code == 200 else f"{self.service}: HTTP {response.status_code}"
        )

    async def request(
        self,
        method: str,
        path: str,
        *,
        response_model: type[T],
        json: Any = None,
        headers: dict[str, str] | None = None,
        clock: WaitClock | None = None,
    ) -> T:
        attempt = 0
        headers = forward_headers(headers)  # X-Request-ID of the request being served
        while True:
            started = time.perf_counter()
            try:
                response = await self._client.request(method, path, json=json, headers=headers)
            except httpx.TransportError as exc:
                UPSTREAM_ERRORS.labels(self.service, "unreachable").inc()
                error = UpstreamError(
                    service=self.service,
                    status=None,
                    type="upstream_unreachable",
                    message=f"{type(exc).__name__}: {exc}",
                )
            else:
                if response.status_code < 400:
                    if clock is not None:
                        clock.add(started, time.perf_counter())
                    try:
                        return response_model.model_validate_json(response.content)
                    except ValidationError as exc:
                        UPSTREAM_ERRORS.labels(self.service, "invalid_response").inc()
                        raise UpstreamError(
                            service=self.service,
                            status=response.status_code,
                            type="upstream_invalid_response",
                            message=str(exc),
                        ) from exc
                error = _error_from(self.service, response)
                if response.status_code >= 500:  # 4xx answers are for the caller to read
                    UPSTREAM_ERRORS.labels(self.service, "status_5xx").inc()
                if response.status_code not in _RETRY_STATUS:
                    if clock is not None:
                        clock.add(started, time.perf_counter())
                    raise error
            if clock is not None:
                clock.add(started, time.perf_counter())
            if attempt >= self.retries:
                raise error
            attempt += 1
            delay = min(8.0, 0.25 * 2**attempt) * (0.5 + random.random() / 2)
            await asyncio.sleep(delay)


def _error_from(service: str, response: httpx.Response) -> UpstreamError:
    try:
        body = response.json()["error"]
        usage = UsageOut.model_validate(body["usage"]) if body.get("usage") else None
        return UpstreamError(
            service=service,
            status=response.status_code,
            type=str(body.get("type", "upstream_error")),
            message=str(body.get("message", response.text[:500])),
            usage=usage,
        )
    except (ValueError, KeyError, TypeError, ValidationError):
        return UpstreamError(
            service=service,
            status=response.status_code,
            type="upstream_error",
            message=response.text[:500],
        )
