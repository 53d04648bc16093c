"""How the judge passes of one request reach a backend, given where it caches prompt prefixes.

A request (a rollout's stage scores, a block's nugget labels) makes several passes that share
a long prefix. Which order reads that prefix the fewest times depends on the server:

- one cache for every sequence (`prefix_cache=shared`: vLLM's automatic prefix caching,
  SGLang, hosted APIs): the first pass runs alone and puts the prefix in the cache, the
  others then go at once; requests are not limited here (the backend's call limit is);
- one cache per parallel slot (`prefix_cache=per_slot`: llama.cpp's `llama-server -np N`):
  a pass lands on whichever slot is idle, so passes sent at once land on different slots
  and each reads the prefix again. A request's passes therefore run back to back (the
  server gives each to the slot holding its prefix) and at most `concurrency` requests run
  at once, one per slot;
- a backend that takes one call at a time (embedded, llama-cpp-python's server: a
  concurrency of 1): one request at a time, its passes back to back, so requests do not
  interleave and evict each other's prefix.

Where a request's passes go back to back, the request holds one place in the backend's
call limiter (`llm.limiter`) from its first pass to its end (`request_scope`): the limiter
is shared by every service on the backend (the live verifier, the nugget verifier, the
audit's reference judge on the live model), so no other request's call, live or
background, lands between a request's passes. The request ends here after its slot here
is freed, so a live request waiting for that slot asks the limiter before a background
call is given the place.
"""

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from rubricate.llm.limiter import request_scope
from rubricate.llm.settings import LLMSettings


class RequestGate:
    def __init__(self, llm: LLMSettings, backend_name: str) -> None:
        limit = requests_at_once(llm, backend_name)
        self._slots = None if limit is None else asyncio.Semaphore(limit)

    @property
    def passes_back_to_back(self) -> bool:
        """A request's passes go one after another (else: the first alone, then the rest at
        once)."""
        return self._slots is not None

    @asynccontextmanager
    async def request(self) -> AsyncIterator[None]:
        """Hold a place for one request's passes."""
        with request_scope():
            if self._slots is None:
                yield
                return
            async with self._slots:
                yield


def requests_at_once(llm: LLMSettings, backend_name: str) -> int | None:
    """Requests whose passes may run at once on this backend; None: no limit (a shared
    prefix cache)."""
    if backend_name == "embedded" or llm.judge_concurrency() == 1:
        return 1
    if llm.prefix_cache == "per_slot":
        return llm.judge_concurrency()
    return None
