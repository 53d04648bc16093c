"""The lean HTTP/1.1 client (`common.lean_http`) against scripted servers on real sockets:
how it reads answers, when it reuses a connection and when it must not, and its failures as
httpx's exception types. The judge backend over it: tests/llm/test_openai_lean.py."""

import asyncio
import gzip
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import httpx
import pytest

from rubricate.common.lean_http import KEEPALIVE_S, LeanClient, applies, dump_json


@dataclass
class Seen:
    """What the scripted server saw: each request's raw bytes, and per connection the
    number of requests it carried."""

    requests: list[bytes] = field(default_factory=list)
    per_connection: list[int] = field(default_factory=list)
    open_now: int = 0
    most_open: int = 0


Writer = asyncio.StreamWriter
Script = Callable[[int, bytes, Writer], Awaitable[bool]]
"""(request number, its raw bytes, the writer) -> keep the connection open."""


def plain(body: bytes = b'{"ok":true}', *, extra: str = "") -> bytes:
    return (
        f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        f"{extra}\r\n"
    ).encode() + body


@asynccontextmanager
async def scripted(script: Script) -> AsyncIterator[tuple[str, Seen]]:
    seen = Seen()

    async def handle(reader: asyncio.StreamReader, writer: Writer) -> None:
        seen.open_now += 1
        seen.most_open = max(seen.most_open, seen.open_now)
        seen.per_connection.append(0)
        mine = len(seen.per_connection) - 1
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                raw = head + await reader.readexactly(length)
                seen.requests.append(raw)
                seen.per_connection[mine] += 1
                if not await script(len(seen.requests) - 1, raw, writer):
                    return
                await writer.drain()
        finally:
            seen.open_now -= 1
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/v1", seen
    finally:
        server.close()


def answering(*answers: bytes) -> Script:
    async def script(n: int, raw: bytes, writer: Writer) -> bool:
        writer.write(answers[min(n, len(answers) - 1)])
        return True

    return script


async def test_a_request_is_written_as_httpx_would_send_its_json() -> None:
    body = {"messages": [{"role": "user", "content": "é ‹x›"}], "max_tokens": 1}
    async with scripted(answering(plain())) as (url, seen):
        client = LeanClient(url, headers={"Authorization": "Bearer k"})
        answer = await client.post_json("chat/completions", dump_json(body), timeout_s=5)
        await client.aclose()
    assert answer.status_code == 200 and answer.json() == {"ok": True}
    head, _, sent = seen.requests[0].partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    assert lines[0] == "POST /v1/chat/completions HTTP/1.1"
    assert {"Authorization: Bearer k", "Content-Type: application/json"} <= set(lines)
    assert f"Host: {url.removeprefix('http://').removesuffix('/v1')}" in lines
    assert f"Content-Length: {len(sent)}" in lines
    # byte for byte what httpx sends for json=body
    assert sent == httpx.Request("POST", "http://x/", json=body).content


async def test_a_connection_is_kept_alive_and_reused() -> None:
    async with scripted(answering(plain())) as (url, seen):
        client = LeanClient(url)
        for _ in range(3):
            assert (await client.post_json("p", b"{}", timeout_s=5)).status_code == 200
        await client.aclose()
    assert seen.per_connection == [3]


async def test_a_chunked_answer_with_trailers_is_read_whole() -> None:
    chunked = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b'4;ext=1\r\n{"a"\r\n5\r\n:123}\r\n0\r\nX-Trailer: t\r\n\r\n'
    )
    async with scripted(answering(chunked, plain(b'{"b":2}'))) as (url, seen):
        client = LeanClient(url)
        assert (await client.post_json("p", b"{}", timeout_s=5)).json() == {"a": 123}
        # the trailers were consumed: the next answer on the connection is read right
        assert (await client.post_json("p", b"{}", timeout_s=5)).json() == {"b": 2}
        await client.aclose()
    assert seen.per_connection == [2]


async def test_an_answer_without_a_length_is_read_to_the_end_and_its_connection_dropped() -> None:
    async def script(n: int, raw: bytes, writer: Writer) -> bool:
        writer.write(b'HTTP/1.1 200 OK\r\n\r\n{"n":%d}' % n)
        return False  # the end of the answer is the end of the connection

    async with scripted(script) as (url, seen):
        client = LeanClient(url)
        assert (await client.post_json("p", b"{}", timeout_s=5)).json() == {"n": 0}
        assert (await client.post_json("p", b"{}", timeout_s=5)).json() == {"n": 1}
        await client.aclose()
    assert seen.per_connection == [1, 1]


@pytest.mark.parametrize(
    "answer",
    [plain(extra="Connection: close\r\n"), b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n{}"],
)
async def test_a_connection_the_server_closes_is_not_reused(answer: bytes) -> None:
    async def script(n: int, raw: bytes, writer: Writer) -> bool:
        writer.write(answer)
        return True  # the server would even keep it: the client must not

    async with scripted(script) as (url, seen):
        client = LeanClient(url)
        for _ in range(2):
            assert (await client.post_json("p", b"{}", timeout_s=5)).status_code == 200
        await client.aclose()
    assert seen.per_connection == [1, 1]


async def test_an_idle_connection_the_server_closed_is_replaced_without_a_failure() -> None:
    """The server closes a kept-alive connection while it is idle (its keep-alive timeout):
    the next request goes on a new connection, sent once."""

    async def script(n: int, raw: bytes, writer: Writer) -> bool:
        writer.write(plain(b'{"n":%d}' % n))
        await writer.drain()
        return n != 0  # closes the first connection after its first answer

    async with scripted(script) as (url, seen):
        client = LeanClient(url)
        assert (await client.post_json("p", b"{}", timeout_s=5)).json() == {"n": 0}
        await asyncio.sleep(0.05)  # the close arrives while the connection is idle
        assert (await client.post_json("p", b"{}", timeout_s=5)).json() == {"n": 1}
        await client.aclose()
    assert seen.per_connection == [1, 1]


async def test_a_reused_connection_found_closed_mid_request_is_tried_once_on_a_new_one() -> None:
    """The race the idle check cannot see: the server closes the connection as the request
    goes out, before any byte of an answer. Sent again, once, on a new connection."""

    async def script(n: int, raw: bytes, writer: Writer) -> bool:
        if n == 1:
            return False  # read the second request, then close without an answer
        writer.write(plain(b'{"n":%d}' % n))
        return True

    async with scripted(script) as (url, seen):
        client = LeanClient(url)
        assert (await client.post_json("p", b"{}", timeout_s=5)).json() == {"n": 0}
        assert (await client.post_json("p", b"{}", timeout_s=5)).json() == {"n": 2}
        await client.aclose()
    assert seen.per_connection == [2, 1]


async def test_a_new_connection_closed_without_an_answer_fails_as_httpx_would() -> None:
    async def script(n: int, raw: bytes, writer: Writer) -> bool:
        return False

    async with scripted(script) as (url, seen):
        client = LeanClient(url)
        with pytest.raises(httpx.RemoteProtocolError, match="without sending a response"):
            await client.post_json("p", b"{}", timeout_s=5)
        await client.aclose()
    assert seen.per_connection == [1]  # a new connection's failure is not sent again


async def test_an_answer_cut_short_is_a_protocol_error() -> None:
    async def script(n: int, raw: bytes, writer: Writer) -> bool:
        writer.write(b'HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{"a"')
        return False

    async with scripted(script) as (url, _):
        client = LeanClient(url)
        with pytest.raises(httpx.RemoteProtocolError, match="within an answer"):
            await client.post_json("p", b"{}", timeout_s=5)
        await client.aclose()


async def test_a_slow_answer_times_out_and_its_late_bytes_never_answer_another_request() -> None:
    """After a timeout (or a cancellation) the connection is closed: the answer that arrives
    late cannot be read as the answer of the next request."""
    release = asyncio.Event()

    async def script(n: int, raw: bytes, writer: Writer) -> bool:
        if n == 0:
            await release.wait()
        writer.write(plain(b'{"n":%d}' % n))
        return True

    async with scripted(script) as (url, seen):
        client = LeanClient(url)
        with pytest.raises(httpx.ReadTimeout):
            await client.post_json("p", b"{}", timeout_s=0.2)
        release.set()
        assert (await client.post_json("p", b"{}", timeout_s=5)).json() == {"n": 1}
        task = asyncio.create_task(client.post_json("p", b"{}", timeout_s=5))
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await client.aclose()
    assert len(seen.per_connection) >= 2 and seen.per_connection[0] == 1


async def test_a_closed_port_is_a_connect_error() -> None:
    async with scripted(answering(plain())) as (url, _):
        pass  # the server is gone: nothing listens on its port
    client = LeanClient(url)
    with pytest.raises(httpx.ConnectError):
        await client.post_json("p", b"{}", timeout_s=5)
    await client.aclose()


async def test_at_most_max_connections_are_open() -> None:
    async def script(n: int, raw: bytes, writer: Writer) -> bool:
        await asyncio.sleep(0.02)
        writer.write(plain(b'{"n":%d}' % n))
        return True

    async with scripted(script) as (url, seen):
        client = LeanClient(url, max_connections=3)
        answers = await asyncio.gather(
            *(client.post_json("p", b"{}", timeout_s=5) for _ in range(12))
        )
        await client.aclose()
    assert sorted(a.json()["n"] for a in answers) == list(range(12))
    assert seen.most_open <= 3 and len(seen.per_connection) <= 3


async def test_an_idle_connection_past_the_keepalive_expiry_is_closed_not_reused() -> None:
    now = [100.0]
    async with scripted(answering(plain())) as (url, seen):
        client = LeanClient(url, clock=lambda: now[0])
        await client.post_json("p", b"{}", timeout_s=5)
        now[0] += KEEPALIVE_S - 0.1
        await client.post_json("p", b"{}", timeout_s=5)  # within the expiry: reused
        now[0] += KEEPALIVE_S + 0.1
        await client.post_json("p", b"{}", timeout_s=5)  # past it: a new connection
        await client.aclose()
    assert seen.per_connection == [2, 1]


async def test_a_compressed_answer_is_decoded_and_an_unknown_encoding_refused() -> None:
    packed = gzip.compress(b'{"z":1}')
    gz = (
        b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n" % len(packed)
        + packed
    )
    br = b"HTTP/1.1 200 OK\r\nContent-Encoding: br\r\nContent-Length: 2\r\n\r\nxx"
    async with scripted(answering(gz, br)) as (url, _):
        client = LeanClient(url)
        assert (await client.post_json("p", b"{}", timeout_s=5)).json() == {"z": 1}
        with pytest.raises(httpx.DecodingError):
            await client.post_json("p", b"{}", timeout_s=5)
        await client.aclose()


async def test_headers_are_read_by_lower_case_name_and_an_interim_answer_skipped() -> None:
    answer = (
        b"HTTP/1.1 100 Continue\r\n\r\n"
        b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 3\r\nX-A: 1\r\nX-A: 2\r\n"
        b"Content-Length: 4\r\n\r\nslow"
    )
    async with scripted(answering(answer)) as (url, _):
        client = LeanClient(url)
        got = await client.post_json("p", b"{}", timeout_s=5)
        await client.aclose()
    assert (got.status_code, got.text) == (429, "slow")
    assert got.headers["retry-after"] == "3" and got.headers["x-a"] == "1, 2"


def test_it_applies_to_plain_http_without_a_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    assert applies("http://vllm:8000/v1")
    assert not applies("https://api.openai.com/v1")  # TLS: httpx
    monkeypatch.setenv("HTTP_PROXY", "http://proxy:3128")
    assert not applies("http://vllm:8000/v1")  # through the proxy: httpx
    monkeypatch.setenv("NO_PROXY", "vllm")
    assert applies("http://vllm:8000/v1")


def test_a_header_with_a_line_break_is_refused() -> None:
    with pytest.raises(ValueError, match="line break"):
        LeanClient("http://x/v1", headers={"Authorization": "Bearer k\r\nX-Evil: 1"})


async def test_the_wait_for_a_free_connection_counts_in_the_timeout() -> None:
    release = asyncio.Event()

    async def script(n: int, raw: bytes, writer: Writer) -> bool:
        if n == 0:
            await release.wait()
        writer.write(plain(b'{"n":%d}' % n))
        return True

    async with scripted(script) as (url, _):
        client = LeanClient(url, max_connections=1)
        holder = asyncio.create_task(client.post_json("p", b"{}", timeout_s=5))
        await asyncio.sleep(0.05)
        with pytest.raises(httpx.PoolTimeout):
            await client.post_json("p", b"{}", timeout_s=0.2)
        release.set()
        assert (await holder).json() == {"n": 0}
        assert (await client.post_json("p", b"{}", timeout_s=5)).json() == {"n": 1}
        await client.aclose()
