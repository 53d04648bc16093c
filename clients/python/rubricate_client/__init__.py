"""The Rubricate Python SDK: HTTP and gRPC clients (sync and async) typed with the gateway's
models, the token mapping helper, and the trainer adapters (`rubricate_client.verl`,
`rubricate_client.trl`, `rubricate_client.openrlhf`).

Needs only httpx and pydantic. The gRPC clients need the `[grpc]` extra
(`pip install 'rubricate-client[grpc]'`). The clients are imported on first use, so code
that only needs the wire models (`rubricate_client.schemas.*`) loads no HTTP stack.
"""

import importlib
from typing import TYPE_CHECKING, Any

from rubricate_client.errors import APIError, InvalidResponse, RubricateError, TransportError
from rubricate_client.tokens import offsets_of, token_ranges, token_values

if TYPE_CHECKING:
    from rubricate_client.grpc import AsyncGrpcClient, GrpcClient
    from rubricate_client.http import AsyncClient, Client
    from rubricate_client.retry import RetryPolicy

_LAZY = {
    "Client": "http",
    "AsyncClient": "http",
    "RetryPolicy": "retry",
    "GrpcClient": "grpc",
    "AsyncGrpcClient": "grpc",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'rubricate_client' has no attribute {name!r}")
    try:
        loaded = importlib.import_module(f"rubricate_client.{module}")
    except ImportError as exc:
        if module == "grpc":
            raise ImportError(
                f"rubricate_client.{name} needs the gRPC extra: "
                "pip install 'rubricate-client[grpc]'"
            ) from exc
        raise
    return getattr(loaded, name)


__all__ = [
    "APIError",
    "AsyncClient",
    "AsyncGrpcClient",
    "Client",
    "GrpcClient",
    "InvalidResponse",
    "RetryPolicy",
    "RubricateError",
    "TransportError",
    "offsets_of",
    "token_ranges",
    "token_values",
]
