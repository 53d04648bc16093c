"""Stop working for a client that has gone away.

A `/get_reward` sample can wait minutes for its group. When its trainer gives up (OpenRLHF
closes the connection after 180 s and posts the sample again), the first request stops
waiting at once, so it no longer holds its admission units and its group's watch; the group
is scored all the same (the rendezvous scores in a task of its own) and the retry, which waits
on the same slot, gets the result.

After the body has been read, the next ASGI `receive()` returns only when the client
disconnects (uvicorn), or when the response has been sent (in-process callers: the gRPC server,
the console, httpx's ASGI transport), so waiting on it is free and never fires early.
"""

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import TypeVar

from fastapi import Request

from rubricate.common.errors import ServiceError

T = TypeVar("T")

CLIENT_CLOSED = 499
"""The status logged for a request whose client went away (nginx's convention); nobody
reads the response."""


async def unless_disconnected(request: Request, work: Awaitable[T]) -> T:
    """`work`'s result; cancelled, with a 499 `client_closed_request`, when the client
    disconnects first."""
    task = asyncio.ensure_future(work)
    gone = asyncio.ensure_future(_disconnect(request))
    try:
        await asyncio.wait({task, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        if not task.done() and not gone.done():  # we were cancelled ourselves
            task.cancel()
        gone.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await gone
    if task.done():
        return task.result()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task
    raise ServiceError(
        CLIENT_CLOSED, "the client closed the connection", type="client_closed_request"
    )


async def _disconnect(request: Request) -> None:
    message = await request.receive()
    if message["type"] != "http.disconnect":  # a receive that replays the body: no signal
        await asyncio.get_running_loop().create_future()
