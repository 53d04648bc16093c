"""Throwaway real PostgreSQL and Redis servers that a test may stop and start again.

The machine's shared servers are never touched: each of these listens on its own free port
with its own data directory, so an outage test cannot disturb other tests.
"""

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from rubricate.embedded import bind_socket


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_port(port: int, *, up: bool, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            sock.settimeout(0.2)
            is_up = sock.connect_ex(("127.0.0.1", port)) == 0
        if is_up == up:
            return
        time.sleep(0.05)
    raise TimeoutError(f"port {port} did not go {'up' if up else 'down'} in {timeout_s}s")


class TempRedis:
    def __init__(self) -> None:
        exe = shutil.which("redis-server")
        if exe is None:
            pytest.fail("redis-server is not installed (Debian package redis-server)")
        self.exe = exe
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [
                self.exe,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_port(self.port, up=True)

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None
        wait_port(self.port, up=False)

    def __enter__(self) -> "TempRedis":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(Exception):
            self.kill()


def _pg_bin() -> Path:
    root = Path("/usr/lib/postgresql")
    versions = sorted(root.glob("*/bin/pg_ctl")) if root.exists() else []
    if not versions:
        pytest.fail("PostgreSQL server binaries not found under /usr/lib/postgresql")
    return versions[-1].parent


class TempPostgres:
    """A private cluster (initdb) owned by the `postgres` user when run as root."""

    def __init__(self) -> None:
        self.bin = _pg_bin()
        self.port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix="rubricate-pg-"))
        self.data = self.root / "data"
        self.as_root = os.geteuid() == 0
        if self.as_root:
            shutil.chown(self.root, "postgres", "postgres")

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *args: str) -> None:
        cmd = [str(self.bin / args[0]), *args[1:]]
        if self.as_root:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        subprocess.run(cmd, check=True, capture_output=True, timeout=120)

    def init(self) -> None:
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8")

    def start(self) -> None:
        opts = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run(
            "pg_ctl", "-D", str(self.data), "-o", opts, "-l", str(self.root / "log"), "-w", "start"
        )
        wait_port(self.port, up=True)

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        wait_port(self.port, up=False)

    def __enter__(self) -> "TempPostgres":
        self.init()
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(Exception):
            self.stop()
        shutil.rmtree(self.root, ignore_errors=True)


@contextlib.contextmanager
def temp_redis() -> Iterator[TempRedis]:
    with TempRedis() as server:
        yield server


@contextlib.contextmanager
def temp_postgres() -> Iterator[TempPostgres]:
    with TempPostgres() as server:
        yield server


@contextlib.contextmanager
def serve_app(app: Any, *, timeout_keep_alive: int = 5) -> Iterator[int]:
    """`app` served by a real uvicorn on a free loopback port (in a thread), for tests that
    need real sockets: stalled bodies, dropped connections. Yields the port."""
    sock = bind_socket("127.0.0.1", 0, service="test server")
    port: int = sock.getsockname()[1]
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        log_level="warning",
        lifespan="on",
        timeout_keep_alive=timeout_keep_alive,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name=f"uvicorn-{port}", daemon=True
    )
    thread.start()
    try:
        wait_port(port, up=True, timeout_s=60)
        yield port
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()
