"""A lean HTTP/1.1 client for the RL-step load generator (`benchmarks/rl_step.py`).

The trainer's side of the benchmark runs on the same cores as the platform it measures. With
httpx each `/get_reward` request costs the load generator about 10 ms of CPU, so at 4,096
one-sample requests the client alone takes ~40 CPU-seconds of the two cores and the wall
time of the one-request-per-sample patterns measures the client, not the platform. This
client writes the request bytes on a kept-alive connection and reads the response by its
Content-Length (or chunks): a fraction of a millisecond a request. It supports what the
benchmark sends (JSON POSTs, a response with a body) and nothing more; its failures are
reported as the exception's name, as httpx's were.
"""

import asyncio
import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class ClosedError(ConnectionError):
    """The server closed the connection before a whole response arrived."""


class _Conn:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    def close(self) -> None:
        self.writer.close()


class LeanClient:
    """Kept-alive connections to one host, opened as requests need them (no cap, as httpx
    without limits), reused once their response is read."""

    def __init__(self, base_url: str) -> None:
        parts = urlsplit(base_url)
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 80
        self._idle: list[_Conn] = []

    async def aclose(self) -> None:
        for conn in self._idle:
            conn.close()
        self._idle.clear()

    async def post(
        self, path: str, body: Any, headers: dict[str, str], *, limit_s: float
    ) -> Response:
        payload = json.dumps(body, separators=(",", ":")).encode()
        head = [
            f"POST {path} HTTP/1.1",
            f"Host: {self.host}:{self.port}",
            "Content-Type: application/json",
            f"Content-Length: {len(payload)}",
            *(f"{k}: {v}" for k, v in headers.items()),
        ]
        request = ("\r\n".join(head) + "\r\n\r\n").encode() + payload
        async with asyncio.timeout(limit_s):
            reused = bool(self._idle)
            conn = self._idle.pop() if reused else await self._open()
            try:
                response, keep = await self._exchange(conn, request)
            except (ClosedError, ConnectionResetError, BrokenPipeError):
                conn.close()
                if not reused:
                    raise
                conn = await self._open()  # a kept-alive connection the server had closed
                response, keep = await self._exchange(conn, request)
            except BaseException:
                conn.close()
                raise
        if keep:
            self._idle.append(conn)
        else:
            conn.close()
        return response

    async def _open(self) -> _Conn:
        reader, writer = await asyncio.open_connection(self.host, self.port, limit=2**22)
        return _Conn(reader, writer)

    @staticmethod
    async def _exchange(conn: _Conn, request: bytes) -> tuple[Response, bool]:
        conn.writer.write(request)
        await conn.writer.drain()
        try:
            raw = await conn.reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as exc:
            raise ClosedError("closed before the response") from exc
        lines = raw.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        headers: dict[str, str] = {}
        for line in lines[1:]:
            if line:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
        if "content-length" in headers:
            body = await conn.reader.readexactly(int(headers["content-length"]))
        elif headers.get("transfer-encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int((await conn.reader.readuntil(b"\r\n")).strip(), 16)
                chunks.append(await conn.reader.readexactly(size + 2))
                if size == 0:
                    break
            body = b"".join(c[:-2] for c in chunks)
        else:
            body = await conn.reader.read()
            return Response(status, headers, body), False
        keep = headers.get("connection", "").lower() != "close"
        return Response(status, headers, body), keep
