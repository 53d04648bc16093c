"""The Rubricate Python SDK: HTTP and gRPC clients (sync and async) typed with the gateway's
models, the token mapping helper, and the trainer adapters (`rubricate.client.verl`,
`rubricate.client.trl`, `rubricate.client.openrlhf`)."""

from rubricate.client.errors import APIError, InvalidResponse, RubricateError, TransportError
from rubricate.client.grpc_client import AsyncGrpcClient, GrpcClient
from rubricate.client.http import AsyncClient, Client
from rubricate.client.retry import RetryPolicy
from rubricate.client.tokens import offsets_of, token_ranges, token_values

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
