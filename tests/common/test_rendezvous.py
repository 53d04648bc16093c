"""The rendezvous (`common.rendezvous`), in process and on a real Redis: entries of one group
sent by several callers (and replicas) are scored once, a dead leader's group is taken over
once, entries sent again are answered from the first result, an incomplete group is scored
after its window, and a waiting entry costs no Redis command of its own however long it
waits."""

import asyncio
from collections.abc import AsyncIterator

import pytest
import redis

from rubricate.common.deadlines import current_deadline, deadline_scope
from rubricate.common.metrics import REDIS_COMMANDS
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
    return Rendezvous(store, retention_s=RETENTION_S, wait_s=10.0, lease_s=lease_s)


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
    found = await store.check("g", "dead", [0], owner="x", lease_s=1)
    assert found.results[0] is not None and found.results[0].endswith("a/2/2")  # its entry too
    assert not found.claimed  # scored: nobody leads it again
    await rv.aclose()


async def test_a_failed_scoring_reaches_every_caller_and_a_retry_scores_its_group_again(
    store: RendezvousStore,
) -> None:
    rv = rendezvous(store)
    calls = 0

    async def broken(batch: Batch) -> list[Scored]:
        nonlocal calls
        calls += 1
        raise ValueError("judge exploded")

    other = Rendezvous(store, retention_s=RETENTION_S, wait_s=10.0)
    results = await asyncio.gather(
        rv.gather("g", entries("a"), expected=2, window_s=30, score=broken),
        other.gather("g", entries("b"), expected=2, window_s=30, score=broken),
        return_exceptions=True,
    )
    # the leader's caller gets the scorer's own error, the other (a replica) the failure
    assert {type(r) for r in results} == {ValueError, RendezvousFailed}
    assert calls == 1
    # the failure is not kept: a retry of one of its samples scores the same group again, at
    # once and whole (not a group of its own, which would change the sample's reward)
    judge = Judge()
    assert await rv.gather("g", entries("a"), expected=None, window_s=30, score=judge) == ["a/2/2"]
    assert [sorted(b.payloads) for b in judge.batches] == [["a", "b"]]
    assert await other.gather("g", entries("b"), expected=2, window_s=30, score=judge) == ["b/2/2"]
    assert len(judge.batches) == 1  # the other sample's retry: answered from that scoring
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


class JoinAnswerDelayed:
    """The real store, with the first join's answer held back after the store ran it: a
    caller cancelled then (its deadline, a closed connection) never hears the answer."""

    def __init__(self, inner: RendezvousStore) -> None:
        self.inner = inner
        self.answered = asyncio.Event()
        self.ran = asyncio.Event()
        self.held = True

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    async def join(self, group: str, **kwargs: object) -> object:
        out = await self.inner.join(group, **kwargs)  # type: ignore[arg-type]
        if self.held:
            self.held = False
            self.ran.set()
            await self.answered.wait()
        return out


async def test_a_leader_cancelled_while_its_join_is_answered_still_leads(
    store: RendezvousStore,
) -> None:
    """The join that opened the instance ran in the store, and its caller was cancelled
    before the answer came back: the instance is led all the same (its lease names an owner
    of this live replica, so no other watch would take it over), and the other member gets
    its result without waiting for the group's window."""
    delayed = JoinAnswerDelayed(store)
    rv = Rendezvous(delayed, retention_s=RETENTION_S, wait_s=10.0, lease_s=5.0)  # type: ignore[arg-type]
    judge = Judge()
    lead = asyncio.create_task(rv.gather("g", entries("a"), expected=2, window_s=30, score=judge))
    await asyncio.wait_for(delayed.ran.wait(), 5)
    lead.cancel()
    with pytest.raises(asyncio.CancelledError):
        await lead
    delayed.answered.set()
    follower = await asyncio.wait_for(
        rv.gather("g", entries("b"), expected=2, window_s=30, score=judge), 10
    )
    assert follower == ["b/2/2"] and len(judge.batches) == 1
    await rv.aclose()


def redis_commands() -> float:
    """Commands the rendezvous' clients have sent to Redis in this process."""
    return float(REDIS_COMMANDS.labels("rendezvous")._value.get())


@pytest.fixture
def redis_store(redis_url: str, redis_client: redis.Redis) -> RendezvousStore:
    return RedisRendezvousStore(redis_url, retention_s=RETENTION_S)


@pytest.mark.parametrize("window_s", [1.0, 10.0])
async def test_a_waiting_sample_sends_no_redis_command_of_its_own(
    redis_store: RendezvousStore, window_s: float
) -> None:
    """Sixteen samples sent one per call wait for a group of 17 that never fills: the commands
    per sample are the same for a short and a ten times longer wait (no polling), and few.
    The short window is 1 s: the sixteen joins must all land inside it, and on a loaded
    worker (make test's niced workers beside the real model) they once took more than 0.3 s."""
    rv, judge = rendezvous(redis_store, lease_s=60.0), Judge()
    # the first run of each script also loads it (NOSCRIPT, SCRIPT LOAD): load them first
    await rv.gather("warm-up", entries("w"), expected=2, window_s=0.1, score=judge)
    judge.batches.clear()
    before = redis_commands()
    names = [f"s{i}" for i in range(16)]
    results = await asyncio.gather(
        *(rv.gather("g", entries(n), expected=17, window_s=window_s, score=judge) for n in names)
    )
    sent = redis_commands() - before
    assert [r[0] for r in results] == [f"{n}/16/17" for n in names]
    assert len(judge.batches) == 1
    # one join per call, then per instance: status, seal, publish (and no renewal: the
    # lease of 60 s, renewed every 20 s, outlives both windows)
    assert sent == 16 + 3, sent
    await rv.aclose()


async def test_a_group_split_over_replicas_is_scored_once_with_all_its_entries(
    redis_url: str, redis_client: redis.Redis
) -> None:
    """Three replicas (each its own store and pool on one Redis) share a group of 12 sent one
    entry per call, round robin."""
    replicas = [
        rendezvous(RedisRendezvousStore(redis_url, retention_s=RETENTION_S)) for _ in range(3)
    ]
    judge = Judge()
    names = [f"s{i}" for i in range(12)]
    results = await asyncio.gather(
        *(
            replicas[i % 3].gather("g", entries(n), expected=12, window_s=30, score=judge)
            for i, n in enumerate(names)
        )
    )
    assert [r[0] for r in results] == [f"{n}/12/12" for n in names]
    assert len(judge.batches) == 1 and sorted(judge.batches[0].payloads) == sorted(names)
    for rv in replicas:
        await rv.aclose()


async def test_a_retried_entry_attaches_to_its_slot_in_the_open_group(
    store: RendezvousStore,
) -> None:
    """A trainer that timed out posts a sample again while its group still gathers: the retry
    waits on the sample's slot, it does not take a second one."""
    rv, judge = rendezvous(store), Judge()
    first = asyncio.create_task(rv.gather("g", entries("a"), expected=2, window_s=30, score=judge))
    await asyncio.sleep(0.05)
    again = asyncio.create_task(rv.gather("g", entries("a"), expected=2, window_s=30, score=judge))
    await asyncio.sleep(0.05)
    assert not first.done() and not again.done()  # still one sample of two
    last = await rv.gather("g", entries("b"), expected=2, window_s=30, score=judge)
    assert (await first, await again, last) == (["a/2/2"], ["a/2/2"], ["b/2/2"])
    assert len(judge.batches) == 1
    await rv.aclose()


async def test_equal_entries_of_one_call_take_a_slot_each(store: RendezvousStore) -> None:
    rv, judge = rendezvous(store), Judge()
    same = [Entry(key="k-x", payload="x"), Entry(key="k-x", payload="x")]
    assert await rv.gather("g", same, expected=2, window_s=30, score=judge) == ["x/2/2"] * 2
    await rv.aclose()


async def test_a_dead_leader_is_replaced_once_across_replicas(
    redis_url: str, redis_client: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    """A leader that joined and died; three replicas have callers waiting on its group: one
    of them takes it over, once, and every caller gets the one scoring's result."""
    stores = [RedisRendezvousStore(redis_url, retention_s=RETENTION_S) for _ in range(3)]
    joined = await stores[0].join(
        "g",
        instance="dead",
        owner="gone",
        entries=entries("a"),
        expected=4,
        private=False,
        lease_s=0.3,
        ttl_s=30,
    )
    assert joined.leader
    replicas = [rendezvous(s, lease_s=0.3) for s in stores]
    judge = Judge()
    with caplog.at_level("WARNING", logger="rubricate.common.rendezvous"):
        results = await asyncio.gather(
            *(
                rv.gather("g", entries(n), expected=4, window_s=30, score=judge)
                for rv, n in zip(replicas, "bcd", strict=True)
            )
        )
    assert [r[0] for r in results] == ["b/4/4", "c/4/4", "d/4/4"]
    assert len(judge.batches) == 1
    takeovers = [r for r in caplog.records if "rendezvous.takeover" in r.getMessage()]
    assert len(takeovers) == 1
    for rv in replicas:
        await rv.aclose()


async def test_a_leader_replica_closed_mid_group_is_taken_over_by_another(
    redis_url: str, redis_client: redis.Redis
) -> None:
    """Replica A opens the group and goes away (its tasks are cancelled, its lease lapses);
    replica B's callers still get the group scored, with A's entry in it."""
    a = rendezvous(RedisRendezvousStore(redis_url, retention_s=RETENTION_S), lease_s=0.3)
    b = rendezvous(RedisRendezvousStore(redis_url, retention_s=RETENTION_S), lease_s=0.3)
    judge = Judge()
    lost = asyncio.create_task(a.gather("g", entries("a"), expected=3, window_s=30, score=judge))
    await asyncio.sleep(0.1)
    await a.aclose()  # the leader's task dies with its replica
    lost.cancel()
    results = await asyncio.gather(
        b.gather("g", entries("b"), expected=3, window_s=30, score=judge),
        b.gather("g", entries("c"), expected=3, window_s=30, score=judge),
    )
    assert list(results) == [["b/3/3"], ["c/3/3"]]
    assert [sorted(x.payloads) for x in judge.batches] == [["a", "b", "c"]]
    await b.aclose()


async def test_a_call_whose_entries_partly_repeat_earlier_ones_is_scored_at_once(
    store: RendezvousStore,
) -> None:
    """A group of its own (`expected=None`) where one entry was scored before: that entry is
    answered from its result and the others are scored together at once, not after the
    window."""
    rv, judge = rendezvous(store), Judge()
    assert await rv.gather("g", entries("a"), expected=None, window_s=30, score=judge) == ["a/1/1"]
    again = await asyncio.wait_for(
        rv.gather("g", entries("a", "b", "c"), expected=None, window_s=30, score=judge), 10
    )
    assert again == ["a/1/1", "b/2/2", "c/2/2"]
    assert [b.payloads for b in judge.batches] == [["a"], ["b", "c"]]
    await rv.aclose()
