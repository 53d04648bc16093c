"""Domain errors raised by the core. Services map them to HTTP 4xx / gRPC status."""


class DomainError(ValueError):
    """Input that the domain rules reject. `field` names where, as a dotted path."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
