"""Work that runs to its end when the caller awaiting it is cancelled.

A store write whose caller goes away (its deadline, a closed connection) may still land; code
that must know how it ended (an instance opened in Redis must be led, a key claimed must be
given back) runs it detached and awaits it through `asyncio.shield`:

    joined = await asyncio.shield(detached(join(), self._tasks))
"""

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def detached(work: Coroutine[Any, Any, T], keep: set["asyncio.Task[Any]"]) -> "asyncio.Task[T]":
    """`work` in a task of its own, held in `keep` while it runs (so that it is not collected,
    and a close can wait for or cancel it); its outcome is read when it ends, since the
    caller that would have read it may be gone."""
    task = asyncio.create_task(work)
    keep.add(task)
    task.add_done_callback(keep.discard)
    task.add_done_callback(_read_outcome)
    return task


def _read_outcome(task: "asyncio.Task[Any]") -> None:
    if not task.cancelled():
        task.exception()
