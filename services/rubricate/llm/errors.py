"""Error kinds of the LLM layer, so callers retry the right ones."""

from rubricate.common.usage import Usage


class LLMError(Exception):
    """Base of every LLM-layer failure. `usage` records what was spent before it failed."""

    def __init__(self, message: str, *, usage: Usage | None = None) -> None:
        super().__init__(message)
        self.usage = usage if usage is not None else Usage()


class TransportError(LLMError):
    """Infrastructure failure: connection refused, timeout, 5xx, 429. Retryable.

    `status`: the server's HTTP status when it answered (429, 5xx), None when it did not
    (connection, timeout, an unreadable body). `retry_after_s`: how long the server asked
    callers to wait (its `Retry-After`), None when it did not say."""

    def __init__(
        self,
        message: str,
        *,
        usage: Usage | None = None,
        status: int | None = None,
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(message, usage=usage)
        self.status = status
        self.retry_after_s = retry_after_s


class BackendRequestError(LLMError):
    """The backend rejected the request (4xx other than 429, prompt too long). Not retryable."""


class OutputParseError(LLMError):
    """The model's output did not parse or validate, even after the repair retry."""

    def __init__(self, message: str, *, raw: str, usage: Usage | None = None) -> None:
        super().__init__(message, usage=usage)
        self.raw = raw


class ModelFileError(LLMError):
    """The embedded model's weights are missing, incomplete or fail their checksum."""


class DeadlineExceeded(LLMError):
    """The request's deadline passed (or too little of it was left) before the judge call
    could be made or finished: the work is dropped, never scored. Not retried."""
