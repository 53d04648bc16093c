"""The gRPC server over a small FastAPI app: an answer the proto cannot carry is an INTERNAL
`proto_mismatch` error (never a silently truncated message), and metadata reaches the app."""

from typing import Any

import pytest
from fastapi import FastAPI, Request

from rubricate.rpc.server import GrpcServer
from rubricate_client import APIError, AsyncGrpcClient, RetryPolicy


@pytest.fixture
async def served() -> Any:
    app = FastAPI()
    seen: list[dict[str, str]] = []

    @app.post("/v1/advantages/stagewise")
    async def drifted(request: Request) -> dict[str, Any]:
        seen.append(dict(request.headers))
        return {"returns": [[1.0]], "advantages": [[0.0]], "variances": [0.5]}

    server = GrpcServer(app, host="127.0.0.1", port=0, max_message_bytes=1 << 20)
    port = await server.start()
    try:
        yield f"127.0.0.1:{port}", seen
    finally:
        await server.stop(0)


async def test_a_field_the_proto_lacks_is_an_internal_error(served: Any) -> None:
    target, seen = served
    async with AsyncGrpcClient(
        target,
        retry=RetryPolicy(max_retries=0),
        tenant="team-a",
        metadata={"x-request-id": "rid-7", "x-not-forwarded": "1"},
    ) as client:
        with pytest.raises(APIError) as caught:
            await client.stagewise_advantages({"scores": [[1, 1, 1, 1]]})
    err = caught.value
    assert (err.status, err.grpc_code, err.type) == (500, "INTERNAL", "proto_mismatch")
    assert "variances" in err.message and err.request_id == "rid-7"
    assert seen[0]["x-rubricate-tenant"] == "team-a" and seen[0]["x-request-id"] == "rid-7"
    assert "x-not-forwarded" not in seen[0]


async def test_an_unknown_method_is_unimplemented(served: Any) -> None:
    import grpc

    target, _ = served
    async with grpc.aio.insecure_channel(target) as channel:
        call = channel.unary_unary("/rubricate.v1.Nope/Nothing")
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await call(b"")
    assert caught.value.code() is grpc.StatusCode.UNIMPLEMENTED
