"""Embedded mode: every service in one process on localhost, the model loaded once.

SQLite instead of PostgreSQL, an in-process cache instead of Redis, the embedded CPU model
(or whatever `RUBRICATE_LLM_*` selects). The services still talk HTTP to each other, exactly
as in production.
"""

import asyncio
import contextlib
import logging
import socket
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

import uvicorn
from fastapi import FastAPI

from rubricate.common.auth import AuthSettings, assert_safe_bind
from rubricate.gateway.app import create_app as create_gateway
from rubricate.gateway.settings import GatewaySettings
from rubricate.llm.base import LLMBackend
from rubricate.llm.factory import build_backend
from rubricate.llm.server import TaskSettings
from rubricate.llm.settings import LLMSettings
from rubricate.miner.app import create_app as create_miner
from rubricate.mining.miner.settings import MinerSettings
from rubricate.rubric_generator.app import create_app as create_generator
from rubricate.store.app import create_app as create_store
from rubricate.store.settings import StoreSettings
from rubricate.verifier.app import create_app as create_verifier

log = logging.getLogger("rubricate.embedded")

SERVICES = ("store", "rubric-generator", "verifier", "miner", "gateway")
DEFAULT_PORTS = {
    "gateway": 8000,
    "rubric-generator": 8001,
    "verifier": 8002,
    "store": 8003,
    "miner": 8004,
}
DEFAULT_GRPC_PORT = 50051


def grpc_port_for(ports: dict[str, int]) -> int:
    """The gateway's gRPC port unless `ports["gateway-grpc"]` sets it: 50051 with the
    default HTTP ports, else a free one (so several platforms can run side by side)."""
    return DEFAULT_GRPC_PORT if ports.get("gateway") == DEFAULT_PORTS["gateway"] else 0


def free_port(host: str = "127.0.0.1") -> int:
    """A port that was free a moment ago. Only for programs that must be told a number before
    they bind (a database, a subprocess); this platform binds its own sockets (`bind_socket`),
    since a port picked here can be handed to an outgoing connection before it is bound."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def bind_socket(host: str, port: int, *, service: str) -> socket.socket:
    """A listening-ready socket on `host:port` (0: any free port), bound now and kept open
    until its server takes it, so no other program can take the port in between."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise RuntimeError(f"{service}: cannot listen on {host}:{port}: {e.strerror}") from e
    return sock


class _Server(uvicorn.Server):
    """Several servers share one loop: signals are the host program's business."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


async def _serve_on(server: uvicorn.Server, sock: socket.socket, name: str) -> None:
    """uvicorn exits the process (`SystemExit`) when start-up fails; inside a shared event loop
    that would tear the loop down under the other services, so it becomes an error here."""
    try:
        with sock:
            await server.serve(sockets=[sock])
    except SystemExit as e:
        raise RuntimeError(f"{name} failed to start (see the log above)") from e


@dataclass
class EmbeddedPlatform:
    data_dir: Path
    host: str = "127.0.0.1"
    ports: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_PORTS))
    """Port per service; 0 picks a free one."""
    llm: LLMSettings = field(default_factory=LLMSettings)
    tasks: TaskSettings = field(default_factory=TaskSettings)
    gateway: GatewaySettings | None = None
    store: StoreSettings | None = None
    """Store settings; default: SQLite in `data_dir` and an in-process cache."""
    miner: MinerSettings | None = None
    """Miner settings; default: the store's database, Qdrant local mode in `data_dir`, Celery
    eager. Its model-server URLs are always this platform's."""
    backend: LLMBackend | None = None
    """Inject a backend (shared by both model servers); default: built from `llm`."""
    urls: dict[str, str] = field(default_factory=dict)
    _servers: list[tuple[uvicorn.Server, "asyncio.Task[None]"]] = field(default_factory=list)
    _sockets: dict[str, socket.socket] = field(default_factory=dict)
    _owns_backend: bool = False

    async def start(self) -> None:
        assert_safe_bind(AuthSettings(), host=self.host, service="embedded platform")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if self.backend is None:
            self.backend = await asyncio.to_thread(build_backend, self.llm)
            self._owns_backend = True
        self.urls = {}
        for name in SERVICES:
            sock = bind_socket(self.host, self.ports.get(name, 0), service=name)
            self._sockets[name] = sock
            self.urls[name] = f"http://{self.host}:{sock.getsockname()[1]}"
        store_settings = self.store or StoreSettings(
            database_url=f"sqlite:///{self.data_dir / 'rubricate.db'}",
            redis_url=None,
            data_dir=self.data_dir,
        )
        base_gateway = self.gateway or GatewaySettings()
        grpc_port = self.ports.get("gateway-grpc")
        if grpc_port is None:  # a configured RUBRICATE_GATEWAY_GRPC_PORT wins over the default
            grpc_port = (
                base_gateway.grpc_port
                if "grpc_port" in base_gateway.model_fields_set
                else grpc_port_for(self.ports)
            )
        gateway_settings = base_gateway.model_copy(
            update={
                "rubric_generator_url": self.urls["rubric-generator"],
                "verifier_url": self.urls["verifier"],
                "store_url": self.urls["store"],
                "miner_url": self.urls["miner"],
                "grpc_host": self.host,
                "grpc_port": grpc_port,
            }
        )
        apps: dict[str, FastAPI] = {
            "store": create_store(store_settings),
            "rubric-generator": create_generator(
                llm=self.llm, tasks=self.tasks, backend=self.backend
            ),
            "verifier": create_verifier(llm=self.llm, tasks=self.tasks, backend=self.backend),
            "miner": create_miner(
                (
                    self.miner
                    or MinerSettings(
                        data_dir=self.data_dir,
                        database_url=store_settings.database_url,
                        eager=True,
                    )
                ).model_copy(
                    update={
                        "rubric_generator_url": self.urls["rubric-generator"],
                        "verifier_url": self.urls["verifier"],
                    }
                ),
                audit_backend=self.backend,  # the reference judge: this model, other design
                audit_tasks=self.tasks,
            ),
            "gateway": create_gateway(gateway_settings),
        }
        for name in SERVICES:
            await self._serve(name, apps[name])
        if apps["gateway"].state.grpc_port:
            self.urls["gateway-grpc"] = f"{self.host}:{apps['gateway'].state.grpc_port}"

    async def _serve(self, name: str, app: FastAPI) -> None:
        sock = self._sockets.pop(name)
        config = uvicorn.Config(
            app, host=self.host, log_level="warning", lifespan="on", access_log=False
        )
        server = _Server(config)
        task = asyncio.create_task(_serve_on(server, sock, name), name=f"serve-{name}")
        self._servers.append((server, task))
        while not server.started:
            if task.done():
                task.result()
                raise RuntimeError(f"{name} stopped during start-up")
            await asyncio.sleep(0.02)
        log.info("embedded.started service=%s url=%s", name, self.urls[name])

    async def stop(self) -> None:
        for sock in self._sockets.values():
            sock.close()
        self._sockets.clear()
        for server, _ in reversed(self._servers):
            server.should_exit = True
        for server, task in reversed(self._servers):
            try:
                await task
            except Exception:  # one server's failure must not leave the others running
                log.exception("embedded.stop_failed port=%s", server.config.port)
        self._servers.clear()
        if self._owns_backend and self.backend is not None:
            await self.backend.aclose()
            self.backend = None

    async def __aenter__(self) -> "EmbeddedPlatform":
        try:
            await self.start()
        except BaseException:
            await self.stop()
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()
