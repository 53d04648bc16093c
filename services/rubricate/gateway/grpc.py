"""Start the gateway's gRPC server in its lifespan (GatewaySettings.grpc_*)."""

from fastapi import FastAPI

from rubricate.common.auth import AuthSettings, is_loopback
from rubricate.gateway.settings import GatewaySettings
from rubricate.rpc.server import GrpcServer


async def start_grpc(app: FastAPI, settings: GatewaySettings) -> GrpcServer | None:
    """The running server (its bound port also in `app.state.grpc_port`), or None if off."""
    app.state.grpc_port = None
    if not settings.grpc_enabled:
        return None
    if AuthSettings().mode == "open" and not is_loopback(settings.grpc_host):
        raise SystemExit(
            f"rubricate gateway: refusing to serve gRPC on {settings.grpc_host} without "
            "authentication; set RUBRICATE_AUTH_MODE=api_key (with keys and the internal "
            "token) or RUBRICATE_GATEWAY_GRPC_HOST=127.0.0.1"
        )
    server = GrpcServer(
        app,
        host=settings.grpc_host,
        port=settings.grpc_port,
        max_message_bytes=settings.max_body_bytes,
    )
    app.state.grpc_port = await server.start()
    return server
