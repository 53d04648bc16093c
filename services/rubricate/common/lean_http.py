"""A lean HTTP/1.1 client for many small requests to one plain-HTTP origin (the judge calls).

httpx (with httpcore, h11 and anyio under it) costs about 2.7 ms of CPU per judge call on the
project's 2-core machine, most of it building and walking its own objects; the same request
written as bytes on a kept-alive asyncio stream and its answer read by its length costs about
0.4 ms (docs/benchmarks.md, issue 33). The judge calls are most of the audit worker's CPU and
a third of the verifier's, so `llm.openai_compat` sends its chat completions through this
client where it `applies`: an `http://` base URL that no proxy setting of the environment
covers (httpx, which reads those settings, serves everything else).

What it does: a request is its method, path, headers and body bytes; the answer is read by
its Content-Length, by chunks, or to the end of the connection, and decoded when the server
compressed it anyway (gzip, deflate; the request asks for none). Connections are kept alive
unless either side says `close`, at most `max_connections` open (a request waits for one),
reused last-in first-out, and closed after `KEEPALIVE_S` idle (httpx's default) or when the
server closed them first. A request whose reused connection turns out closed before any byte
of an answer (the server closed it while idle, so it never read the request) is sent once
more on a new connection. Failures raise httpx's exception types (`ConnectError`,
`ConnectTimeout`, `ReadTimeout`, `ReadError`, `RemoteProtocolError`, `DecodingError`), so a
caller handles both clients alike; a connection that failed, timed out or was cancelled in
the middle of an exchange is closed, never reused.
"""

import asyncio
import contextlib
import json
import time
import urllib.request
import zlib
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import urlsplit

import httpx

KEEPALIVE_S: Final = 5.0
"""An idle connection older than this is closed, not reused (httpx's `keepalive_expiry`)."""
_NO_BODY_STATUS: Final = frozenset({204, 304})
_DISCONNECTED: Final = "Server disconnected without sending a response."  # httpcore's words


def applies(base_url: str) -> bool:
    """Whether this client can serve `base_url`: plain `http://`, no proxy configured for
    its host in the environment (HTTP_PROXY, ALL_PROXY, NO_PROXY, as httpx reads them)."""
    parts = urlsplit(base_url)
    if parts.scheme != "http" or not parts.hostname:
        return False
    proxies = urllib.request.getproxies()
    if not (proxies.get("http") or proxies.get("all")):
        return True
    return bool(urllib.request.proxy_bypass(parts.hostname))


def dump_json(value: Any) -> bytes:
    """`value` as the JSON bytes httpx sends for `json=value` (the same bytes either way)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode(
        "utf-8"
    )


@dataclass(frozen=True)
class Response:
    status_code: int
    headers: Mapping[str, str]
    """Lower-case names; a repeated header's values joined with ", "."""
    content: bytes

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", errors="replace")

    def json(self) -> Any:
        return json.loads(self.content)


@dataclass(eq=False)
class _Connection:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    idle_since: float = 0.0

    def closed(self) -> bool:
        return self.writer.is_closing() or self.reader.at_eof()

    def close(self) -> None:
        self.writer.close()


class _Stale(Exception):
    """A reused connection was closed before any byte of the answer."""


@dataclass
class _Pool:
    idle: deque[_Connection] = field(default_factory=deque)
    closed: bool = False


class LeanClient:
    def __init__(
        self,
        base_url: str,
        *,
        headers: Mapping[str, str] | None = None,
        max_connections: int = 64,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`base_url`: `http://host[:port][/prefix]`; request paths are relative to it.
        `headers`: sent with every request (e.g. Authorization)."""
        parts = urlsplit(base_url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"the lean client serves plain http:// URLs, not {base_url!r}")
        if max_connections < 1:
            raise ValueError("max_connections must be at least 1")
        self.host = parts.hostname
        self.port = parts.port or 80
        self.prefix = parts.path.rstrip("/") + "/"
        authority = self.host if self.port == 80 else f"{self.host}:{self.port}"
        if ":" in self.host:  # an IPv6 literal
            authority = f"[{self.host}]" if self.port == 80 else f"[{self.host}]:{self.port}"
        fixed = {
            "Host": authority,
            "Accept": "*/*",
            "Accept-Encoding": "identity",
            "Connection": "keep-alive",
            "User-Agent": "rubricate",
            **(headers or {}),
        }
        for name, value in fixed.items():
            if any(c in name + value for c in "\r\n\0"):
                raise ValueError(f"header {name!r} holds a line break")
        self._head_fixed = "".join(f"{k}: {v}\r\n" for k, v in fixed.items()).encode("latin-1")
        self._slots = asyncio.Semaphore(max_connections)
        self._pool = _Pool()
        self._clock = clock

    async def post_json(self, path: str, body: bytes, *, timeout_s: float) -> Response:
        """POST `body` (JSON bytes, `dump_json`) to `path`."""
        return await self.request(
            "POST", path, body=body, content_type="application/json", timeout_s=timeout_s
        )

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: bytes = b"",
        content_type: str | None = None,
        timeout_s: float,
        connect_timeout_s: float = 10.0,
    ) -> Response:
        """One exchange, within `timeout_s` overall, the wait for a free connection included
        (connecting within `connect_timeout_s` of it): `PoolTimeout`, `ConnectTimeout` or
        `ReadTimeout` when it runs out."""
        url = self.prefix + path.lstrip("/")
        head = f"{method} {url} HTTP/1.1\r\n".encode("latin-1") + self._head_fixed
        if content_type is not None:
            head += f"Content-Type: {content_type}\r\n".encode("latin-1")
        if body or method in ("POST", "PUT", "PATCH"):
            head += b"Content-Length: %d\r\n" % len(body)
        message = head + b"\r\n" + body
        waited = True
        try:
            async with asyncio.timeout(timeout_s):
                async with self._slots:
                    waited = False
                    return await self._exchange(message, method, min(connect_timeout_s, timeout_s))
        except TimeoutError as exc:
            if waited:
                raise httpx.PoolTimeout(
                    f"no connection to {self.host}:{self.port} free within {timeout_s:g}s"
                ) from exc
            if isinstance(exc, _ConnectTimedOut):
                raise httpx.ConnectTimeout(f"connecting to {self.host}:{self.port}") from exc
            raise httpx.ReadTimeout(
                f"no whole answer from {self.host}:{self.port} within {timeout_s:g}s"
            ) from exc

    async def _exchange(self, message: bytes, method: str, connect_timeout_s: float) -> Response:
        conn = self._reuse()
        if conn is not None:
            try:
                return await self._on(conn, message, method, reused=True)
            except _Stale:
                pass  # the server closed it while idle: once more on a new connection
        conn = await self._connect(connect_timeout_s)
        try:
            return await self._on(conn, message, method, reused=False)
        except _Stale as exc:
            raise httpx.RemoteProtocolError(
                "Server disconnected without sending a response."
            ) from exc

    def _reuse(self) -> _Connection | None:
        """The most recently used idle connection that is still good; expired or closed ones
        are closed on the way."""
        idle = self._pool.idle
        oldest_kept = self._clock() - KEEPALIVE_S
        while idle and idle[0].idle_since < oldest_kept:
            idle.popleft().close()
        while idle:
            conn = idle.pop()
            if not conn.closed():
                return conn
            conn.close()
        return None

    async def _connect(self, timeout_s: float) -> _Connection:
        try:
            async with asyncio.timeout(timeout_s):
                reader, writer = await asyncio.open_connection(self.host, self.port)
        except TimeoutError as exc:
            raise _ConnectTimedOut() from exc
        except OSError as exc:
            raise httpx.ConnectError(f"{type(exc).__name__}: {exc}") from exc
        return _Connection(reader, writer)

    async def _on(
        self, conn: _Connection, message: bytes, method: str, *, reused: bool
    ) -> Response:
        """The exchange on `conn`; the connection goes back to the pool when both sides
        keep it alive, else it is closed (also on any failure or cancellation)."""
        keep = False
        try:
            try:
                conn.writer.write(message)
                await conn.writer.drain()
                first = await conn.reader.readuntil(b"\r\n\r\n")
            except asyncio.IncompleteReadError as exc:
                if not exc.partial and reused:
                    raise _Stale() from exc
                if not exc.partial:
                    raise
                raise httpx.RemoteProtocolError("the answer's head was cut short") from exc
            except (ConnectionResetError, BrokenPipeError) as exc:
                if reused:
                    raise _Stale() from exc
                raise
            response, keep = await _read_answer(conn.reader, first, method)
            return response
        except asyncio.IncompleteReadError as exc:
            raise httpx.RemoteProtocolError(
                _DISCONNECTED
                if not exc.partial
                else "the server closed the connection within an answer"
            ) from exc
        except asyncio.LimitOverrunError as exc:
            raise httpx.RemoteProtocolError("an answer's head or chunk line is too long") from exc
        except OSError as exc:
            raise httpx.ReadError(f"{type(exc).__name__}: {exc}") from exc
        finally:
            if keep and not self._pool.closed:
                conn.idle_since = self._clock()
                self._pool.idle.append(conn)
            else:
                conn.close()

    async def aclose(self) -> None:
        self._pool.closed = True
        idle, self._pool.idle = list(self._pool.idle), deque()
        for conn in idle:
            conn.close()
        for conn in idle:
            with contextlib.suppress(OSError):
                await conn.writer.wait_closed()


class _ConnectTimedOut(TimeoutError):
    """Connecting took longer than the connect timeout."""


async def _read_answer(
    reader: asyncio.StreamReader, head: bytes, method: str
) -> tuple[Response, bool]:
    """The answer whose head (through its blank line) is `head`; and whether the
    connection may be reused. Interim (1xx) answers are skipped."""
    while True:
        status, version, headers = _parse_head(head)
        if not 100 <= status < 200:
            break
        head = await reader.readuntil(b"\r\n\r\n")
    connection = headers.get("connection", "").lower()
    keep = version == "HTTP/1.1" and "close" not in connection
    if method == "HEAD" or status in _NO_BODY_STATUS:
        content = b""
    elif "chunked" in headers.get("transfer-encoding", "").lower():
        content = await _read_chunks(reader)
    elif "content-length" in headers:
        try:
            length = int(headers["content-length"])
        except ValueError as exc:
            raise httpx.RemoteProtocolError("a malformed Content-Length") from exc
        content = await reader.readexactly(length)
    else:
        content = await reader.read()
        keep = False
    return Response(status, headers, _decoded(content, headers)), keep


def _parse_head(head: bytes) -> tuple[int, str, dict[str, str]]:
    lines = head[:-4].decode("latin-1").split("\r\n")
    version, _, rest = lines[0].partition(" ")
    code = rest[:3]
    if not version.startswith("HTTP/1.") or not code.isdigit():
        raise httpx.RemoteProtocolError(f"not an HTTP/1 status line: {lines[0][:80]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep:
            raise httpx.RemoteProtocolError(f"a malformed header line: {line[:80]!r}")
        key = name.strip().lower()
        value = value.strip()
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    return int(code), version, headers


async def _read_chunks(reader: asyncio.StreamReader) -> bytes:
    parts: list[bytes] = []
    while True:
        line = await reader.readuntil(b"\r\n")
        try:
            size = int(line[:-2].split(b";", 1)[0], 16)
        except ValueError as exc:
            raise httpx.RemoteProtocolError("a malformed chunk size") from exc
        if size == 0:
            while await reader.readuntil(b"\r\n") != b"\r\n":  # trailers, then the end
                pass
            return b"".join(parts)
        chunk = await reader.readexactly(size + 2)
        if chunk[-2:] != b"\r\n":
            raise httpx.RemoteProtocolError("a chunk not ended by CRLF")
        parts.append(chunk[:-2])


def _decoded(content: bytes, headers: Mapping[str, str]) -> bytes:
    encoding = headers.get("content-encoding", "identity").strip().lower()
    if encoding in ("", "identity") or not content:
        return content
    try:
        if encoding in ("gzip", "x-gzip"):
            return zlib.decompress(content, 16 + zlib.MAX_WBITS)
        if encoding == "deflate":
            try:
                return zlib.decompress(content)
            except zlib.error:
                return zlib.decompress(content, -zlib.MAX_WBITS)  # raw deflate
    except zlib.error as exc:
        raise httpx.DecodingError(f"an answer that does not decode as {encoding}") from exc
    raise httpx.DecodingError(f"an answer in an encoding this client does not read: {encoding}")
