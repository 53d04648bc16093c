"""The SDK's errors. `APIError` carries the server's error body (the same over HTTP and gRPC);
`TransportError` is a network failure or timeout that outlived the retries."""

from typing import Literal

from rubricate_client.schemas.errors import ErrorBody


class RubricateError(Exception):
    """Base of every error the SDK raises."""


class DomainError(ValueError):
    """Input that the domain rules reject. `field` names where, as a dotted path.

    The SDK's helpers (the curriculum) raise it; the server raises it from its domain code
    and answers it with HTTP 4xx / a gRPC status in the one error shape."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


class APIError(RubricateError):
    """The platform answered with an error status (after retries, for 429 and 5xx)."""

    def __init__(
        self,
        *,
        status: int,
        error: ErrorBody | None,
        text: str = "",
        retry_after: float | None = None,
        transport: Literal["http", "grpc"] = "http",
        grpc_code: str | None = None,
    ) -> None:
        self.status = status
        self.error = error
        self.text = text
        self.retry_after = retry_after
        self.transport = transport
        self.grpc_code = grpc_code
        detail = error.message if error is not None else text[:300]
        super().__init__(f"{status} {self.type}: {detail}")

    @property
    def type(self) -> str:
        return self.error.type if self.error is not None else "http_error"

    @property
    def message(self) -> str:
        return self.error.message if self.error is not None else self.text

    @property
    def field(self) -> str | None:
        return self.error.field if self.error is not None else None

    @property
    def request_id(self) -> str | None:
        return self.error.request_id if self.error is not None else None

    @property
    def retryable(self) -> bool:
        """429 and 5xx are retried; any other status fails at once."""
        return self.status == 429 or self.status >= 500


class TransportError(RubricateError):
    """No answer: connection refused or reset, or a timeout."""

    def __init__(self, message: str, *, timeout: bool) -> None:
        super().__init__(message)
        self.timeout = timeout

    @property
    def retryable(self) -> bool:
        return True


class InvalidResponse(RubricateError):
    """The platform's answer did not match the endpoint's response model."""
