"""The rendezvous (`common.rendezvous`), in process and on a real Redis: entries of one group
sent by several callers are scored once, a dead leader's group is taken over, entries sent
again are answered from the first result, and an incomplete group is scored after its window."""

import asyncio
from collections.abc import AsyncIterator

import pytest
import redis

from rubricate.common.rendezvous import (
    Batch,
    Entry,
    MemoryRendezvousStore,
    RedisRendezvousStore,
    Rendezvous,
    RendezvousFailed,
    RendezvousStore,
    Scored,
)
from rubricate.common.upstream import current_deadline, deadline_scope

RETENTION_S = 60.0


@pytest.fixture(params=["memory", "redis"])
async def store(request: pytest.FixtureRequest) -> AsyncIterator[RendezvousStore]:
    if request.param == "memory":
        yield MemoryRendezvousStore(retention_s=RETENTION_S)
        return
    url: str = request.getfixturevalue("redis_url")
    client: redis.Redis = request.getfixturevalue("redis_client")  # flushes the db
    assert client.ping()
    shared = RedisRendezvousStore(url, retention_s=RETENTION_S)
    yield shared
    await shared.aclose()


class Judge:
    """Scores a batch as `<payload>/<batch size>/<expected>` and records every batch."""

    def __init__(self, *, keep: bool = True) -> None:
        self.batches: list[Batch] = []
        self.keep = keep
        self.started = asyncio.Event()

    async def __call__(self, batch: Batch) -> list[Scored]:
        self.batches.append(batch)
        self.started.set()
        await asyncio.sleep(0.05)
        n = len(batch.payloads)
        return [Scored(f"{p}/{n}/{batch.expected}", keep=self.keep) for p in batch.payloads]


def rendezvous(store: RendezvousStore, *, lease_s: float = 5.0) -> Rendezvous:
    return Rendezvous(store, retention_s=RETENTION_S, wait_s=10.0, lease_s=lease_s, poll_s=0.01)


def entries(*names: str) -> list[Entry]:
    return [Entry(key=f"k-{n}", payload=n) for n in names]


async def test_parts_sent_by_several_callers_are_scored_once(store: RendezvousStore) -> None:
    rv, judge = rendezvous(store), Judge()
    calls = [
        rv.gather("g", entries("a"), expected=4, window_s=30, score=judge),
        rv.gather("g", entries("b", "c"), expected=4, window_s=30, score=judge),
        rv.gather("g", entries("d"), expected=4, window_s=30, score=judge),
    ]
    results = await asyncio.gather(*calls)
    assert list(results) == [["a/4/4"], ["b/4/4", "c/4/4"], ["d/4/4"]]
    assert len(judge.batches) == 1 and sorted(judge.batches[0].payloads) == list("abcd")
    # the next parts of the group open a new instance
    assert await rv.gather("g", entries("e"), expected=1, window_s=30, score=judge) == ["e/1/1"]
    await rv.aclose()


async def test_a_full_instance_leaves_the_rest_to_the_next(store: RendezvousStore) -> None:
    rv, judge = rendezvous(store), Judge()
    first = rv.gather("g", entries("a", "b", "c"), expected=2, window_s=0.3, score=judge)
    assert await first == ["a/2/2", "b/2/2", "c/1/2"]  # c waited its window alone
    assert [len(b.payloads) for b in judge.batches] == [2, 1]
    await rv.aclose()


async def test_an_incomplete_group_is_scored_after_its_window(store: RendezvousStore) -> None:
    rv, judge = rendezvous(store), Judge()
    results = await asyncio.gather(
        rv.gather("g", entries("a"), expected=8, window_s=1.0, score=judge),
        rv.gather("g", entries("b"), expected=8, window_s=1.0, score=judge),
    )
    assert list(results) == [["a/2/8"], ["b/2/8"]]
    assert len(judge.batches) == 1
    await rv.aclose()


async def test_entries_sent_again_are_answered_from_the_first_result(
    store: RendezvousStore,
) -> None:
    rv, judge = rendezvous(store), Judge()
    first = asyncio.create_task(
        rv.gather("g", entries("a", "b"), expected=None, window_s=30, score=judge)
    )
    await judge.started.wait()  # scoring has started
    during = await rv.gather("g", entries("b"), expected=None, window_s=30, score=judge)
    assert await first == ["a/2/2", "b/2/2"] and during == ["b/2/2"]
    after = await rv.gather("other", entries("a", "z"), expected=3, window_s=0.2, score=judge)
    assert after == ["a/2/2", "z/1/3"]  # only z is new
    assert [b.payloads for b in judge.batches] == [["a", "b"], ["z"]]
    await rv.aclose()


async def test_results_not_kept_are_scored_again(store: RendezvousStore) -> None:
    rv, judge = rendezvous(store), Judge(keep=False)
    assert await rv.gather("g", entries("a"), expected=None, window_s=1, score=judge) == ["a/1/1"]
    assert await rv.gather("g", entries("a"), expected=None, window_s=1, score=judge) == ["a/1/1"]
    assert len(judge.batches) == 2
    await rv.aclose()


async def test_a_dead_leaders_group_is_taken_over(store: RendezvousStore) -> None:
    # a leader that joined one entry and died: it never gathers, scores or renews
    joined = await store.join(
        "g",
        instance="dead",
        owner="gone",
        entries=entries("a"),
        expected=2,
        private=False,
        lease_s=0.2,
        ttl_s=30,
    )
    assert joined.leader
    rv, judge = rendezvous(store, lease_s=0.2), Judge()
    assert await rv.gather("g", entries("b"), expected=2, window_s=30, score=judge) == ["b/2/2"]
    assert [sorted(b.payloads) for b in judge.batches] == [["a", "b"]]
    (result,) = await store.results("g", "dead", [0])
    assert result is not None and result.endswith("a/2/2")  # the dead leader's entry too
    await rv.aclose()


async def test_a_failed_scoring_reaches_every_caller_and_is_not_kept(
    store: RendezvousStore,
) -> None:
    rv = rendezvous(store)
    calls = 0

    async def broken(batch: Batch) -> list[Scored]:
        nonlocal calls
        calls += 1
        raise ValueError("judge exploded")

    other = Rendezvous(store, retention_s=RETENTION_S, wait_s=10.0, poll_s=0.01)
    results = await asyncio.gather(
        rv.gather("g", entries("a"), expected=2, window_s=30, score=broken),
        other.gather("g", entries("b"), expected=2, window_s=30, score=broken),
        return_exceptions=True,
    )
    # the leader's caller gets the scorer's own error, the other (a replica) the failure
    assert {type(r) for r in results} == {ValueError, RendezvousFailed}
    assert calls == 1
    judge = Judge()
    assert await rv.gather("g", entries("a"), expected=None, window_s=1, score=judge) == ["a/1/1"]
    await rv.aclose()
    await other.aclose()


async def test_the_group_is_scored_without_the_leading_requests_deadline(
    store: RendezvousStore,
) -> None:
    """The leader's request had a short deadline: its own wait ends there, but the group's
    scoring (for every member) runs without it and the other member gets its result."""
    rv, seen, release = rendezvous(store), [], asyncio.Event()

    async def judge(batch: Batch) -> list[Scored]:
        seen.append(current_deadline())
        # scoring ends only once the leader's request has given up: no race on a slow loop
        await release.wait()
        return [Scored(f"{p}/{len(batch.payloads)}", keep=True) for p in batch.payloads]

    async def leader() -> list[str]:
        with deadline_scope(0.1):
            return await asyncio.wait_for(
                rv.gather("g", entries("a"), expected=2, window_s=30, score=judge), 0.1
            )

    lead = asyncio.create_task(leader())
    await asyncio.sleep(0.02)
    follow = asyncio.create_task(rv.gather("g", entries("b"), expected=2, window_s=30, score=judge))
    with pytest.raises(TimeoutError):
        await lead
    assert not follow.done()
    release.set()
    follower = await asyncio.wait_for(follow, 10)
    assert follower == ["b/2"] and seen == [None]
    await rv.aclose()
