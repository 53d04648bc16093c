"""The rendezvous through infrastructure faults (issue 33): no group is orphaned. Each test
runs on a private Redis of its own (append-only, as deployed), which it kills and restarts;
the machine's shared Redis is never touched."""

import asyncio
import contextlib
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
import redis.asyncio as redis

from rubricate.common.rendezvous import (
    Batch,
    Check,
    Entry,
    Joined,
    RedisRendezvousStore,
    Rendezvous,
    RendezvousDraining,
    RendezvousFailed,
    Scored,
)
from tests.support.servers import TempRedis, wait_port

RETENTION_S = 60.0


class PersistentRedis(TempRedis):
    """A private redis-server with an append-only file synced on every write: restarted, it
    comes back with its data (a deployment's Redis with `appendonly yes`)."""

    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="rubricate-redis-")

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [
                self.exe,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--dir",
                self.dir,
                "--save",
                "",
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_port(self.port, up=True)

    def __exit__(self, *exc: object) -> None:
        super().__exit__(*exc)
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def server() -> Iterator[PersistentRedis]:
    s = PersistentRedis()
    s.start()
    try:
        yield s
    finally:
        s.__exit__(None, None, None)


class GatedJudge:
    """Scores `<payload>/<batch size>` once `release` is set; records every batch."""

    def __init__(self) -> None:
        self.batches: list[Batch] = []
        self.started = asyncio.Event()
        self.release = asyncio.Event()

    async def __call__(self, batch: Batch) -> list[Scored]:
        self.batches.append(batch)
        self.started.set()
        await self.release.wait()
        return [Scored(f"{p}/{len(batch.payloads)}") for p in batch.payloads]


def entries(*names: str) -> list[Entry]:
    return [Entry(key=f"k-{n}", payload=n) for n in names]


def replica(url: str, *, lease_s: float, wait_s: float = 30.0) -> Rendezvous:
    store = RedisRendezvousStore(url, retention_s=RETENTION_S, timeout_s=1.0)
    return Rendezvous(store, retention_s=RETENTION_S, wait_s=wait_s, lease_s=lease_s)


async def restart(server: PersistentRedis, *, down_s: float) -> None:
    await asyncio.to_thread(server.kill)
    await asyncio.sleep(down_s)
    await asyncio.to_thread(server.start)


async def test_redis_restarted_while_the_leader_scores(server: PersistentRedis) -> None:
    """Redis dies while the leader's judge runs and comes back 1.5 s later with its data:
    the leader publishes the result it holds (no second scoring), and every caller, on its
    replica and on another, is answered: nobody waits for the keys to expire."""
    a, b = replica(server.url, lease_s=2.0), replica(server.url, lease_s=2.0)
    judge = GatedJudge()
    first = asyncio.create_task(a.gather("g", entries("a"), expected=2, window_s=60, score=judge))
    await asyncio.sleep(0.2)
    second = asyncio.create_task(b.gather("g", entries("b"), expected=2, window_s=60, score=judge))
    await asyncio.wait_for(judge.started.wait(), 10)
    outage = asyncio.create_task(restart(server, down_s=1.5))
    await asyncio.sleep(0.3)
    judge.release.set()  # the result is ready while Redis is down
    await outage
    results = await asyncio.wait_for(asyncio.gather(first, second), 15)
    assert list(results) == [["a/2"], ["b/2"]]
    assert len(judge.batches) == 1
    await a.aclose()
    await b.aclose()


async def test_a_redis_outage_longer_than_the_lease_scores_the_group_once(
    server: PersistentRedis,
) -> None:
    """Redis is down longer than a lease, so every replica's liveness has lapsed when it
    comes back: the leader (still alive, holding its result) renews and publishes; the other
    replica's watch does not take the group over meanwhile (one scoring)."""
    a, b = replica(server.url, lease_s=3.0), replica(server.url, lease_s=3.0)
    judge = GatedJudge()
    first = asyncio.create_task(a.gather("g", entries("a"), expected=2, window_s=60, score=judge))
    await asyncio.sleep(0.2)
    second = asyncio.create_task(b.gather("g", entries("b"), expected=2, window_s=60, score=judge))
    await asyncio.wait_for(judge.started.wait(), 10)
    outage = asyncio.create_task(restart(server, down_s=4.0))
    await asyncio.sleep(0.3)
    judge.release.set()
    await outage
    results = await asyncio.wait_for(asyncio.gather(first, second), 20)
    assert list(results) == [["a/2"], ["b/2"]]
    assert len(judge.batches) == 1
    await a.aclose()
    await b.aclose()


class LosesFirstAnswer(RedisRendezvousStore):
    """Its first join runs in Redis but the answer never arrives (the connection drops)."""

    lost = False

    async def join(self, group: str, **kwargs: object) -> Joined:
        joined = await super().join(group, **kwargs)  # type: ignore[arg-type]
        if not self.lost:
            self.lost = True
            raise ConnectionError("connection lost after the script ran")
        return joined


async def test_a_join_whose_answer_was_lost_still_leads_its_group(
    server: PersistentRedis,
) -> None:
    """The join that opened the group ran, but its answer was lost: the instance exists with
    a lease naming a live replica. The join is tried again, finds its own instance and leads
    it, so the group is scored (before: the caller got an error, and every sample of the
    group waited on a lease nobody would use until the keys expired)."""
    store = LosesFirstAnswer(server.url, retention_s=RETENTION_S, timeout_s=1.0)
    a = Rendezvous(store, retention_s=RETENTION_S, wait_s=30.0, lease_s=2.0)
    b = replica(server.url, lease_s=2.0)
    judge = GatedJudge()
    judge.release.set()
    first = asyncio.create_task(a.gather("g", entries("a"), expected=2, window_s=60, score=judge))
    await asyncio.sleep(0.3)
    second = asyncio.create_task(b.gather("g", entries("b"), expected=2, window_s=60, score=judge))
    results = await asyncio.wait_for(asyncio.gather(first, second), 10)
    assert list(results) == [["a/2"], ["b/2"]]
    assert store.lost and len(judge.batches) == 1
    await a.aclose()
    await b.aclose()


class CheckFailsOnce(RedisRendezvousStore):
    """Once `lapsed` names a replica, its next `check` fails as if Redis had restarted, and
    the try after it finds that replica's liveness lapsed (an outage longer than a lease,
    Redis back before the replica has renewed); later checks reach Redis untouched."""

    def __init__(self, url: str, **kwargs: Any) -> None:
        super().__init__(url, **kwargs)
        self.raw = redis.Redis.from_url(url)
        self.lapsed = ""
        self.tries = 0

    async def check(self, group: str, instance: str, slots: Sequence[int], **kw: Any) -> Check:
        if self.lapsed and self.tries < 2:
            self.tries += 1
            await self.raw.delete(*await self.raw.keys(f"*live:{self.lapsed}"))
            if self.tries == 1:
                raise ConnectionError("Redis restarted")
        return await super().check(group, instance, slots, **kw)


async def test_a_check_tried_again_after_an_outage_does_not_claim_a_live_leaders_group(
    server: PersistentRedis,
) -> None:
    """A watch's check fails in an outage during which the live leader's liveness lapsed;
    the check's next try reaches Redis before the leader has renewed. It must not claim the
    group (found on CI: the try kept the claim decided before the outage, took the group
    over at once and scored it a second time): claims wait a lease after an outage."""
    a = replica(server.url, lease_s=3.0)
    store = CheckFailsOnce(server.url, retention_s=RETENTION_S, timeout_s=1.0)
    b = Rendezvous(store, retention_s=RETENTION_S, wait_s=30.0, lease_s=3.0)
    judge = GatedJudge()
    first = asyncio.create_task(a.gather("g", entries("a"), expected=2, window_s=60, score=judge))
    await asyncio.sleep(0.2)
    second = asyncio.create_task(b.gather("g", entries("b"), expected=2, window_s=60, score=judge))
    await asyncio.wait_for(judge.started.wait(), 10)
    store.lapsed = a.store.replica  # b's watch checks again within a lease
    await asyncio.sleep(4.0)
    judge.release.set()
    results = await asyncio.wait_for(asyncio.gather(first, second), 20)
    assert list(results) == [["a/2"], ["b/2"]]
    assert store.tries == 2 and len(judge.batches) == 1
    await store.raw.aclose()
    await a.aclose()
    await b.aclose()


class PublishFailsWhileDown(RedisRendezvousStore):
    """Publishing and resigning fail until `up` is set (the leader's writes are lost while
    every other command works: a failing primary, a network partition of one replica)."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.up = asyncio.Event()

    async def publish(self, group: str, instance: str, results: Sequence[str], **kw: float) -> bool:
        if not self.up.is_set():
            raise ConnectionError("publish lost")
        return await super().publish(group, instance, results, **kw)

    async def resign(self, group: str, instance: str, *, owner: str) -> None:
        if not self.up.is_set():
            raise ConnectionError("resign lost")
        await super().resign(group, instance, owner=owner)


async def test_a_leader_that_gave_up_releases_its_lease_when_redis_answers(
    server: PersistentRedis,
) -> None:
    """The leader's writes fail for longer than it tries (its instance's lifetime is short
    here): it gives up, and its lease is released as soon as Redis answers its replica again
    (not left held by a live replica until the keys expire), so the other replica's watch
    takes the group over and its caller is answered."""
    store = PublishFailsWhileDown(server.url, retention_s=RETENTION_S, timeout_s=1.0)
    a = Rendezvous(store, retention_s=RETENTION_S, wait_s=0.5, lease_s=1.0)
    b = replica(server.url, lease_s=1.0, wait_s=60.0)
    judge = GatedJudge()
    judge.release.set()
    lost = asyncio.create_task(a.gather("g", entries("a"), expected=2, window_s=30, score=judge))
    await asyncio.sleep(0.2)
    second = asyncio.create_task(b.gather("g", entries("b"), expected=2, window_s=30, score=judge))
    await asyncio.sleep(2.5)  # a's leader tried for its 1.5 s and gave up
    assert not second.done()
    store.up.set()
    assert await asyncio.wait_for(second, 10) == ["b/2"]
    assert len(judge.batches) == 2  # a's result was lost with its writes: b scored again
    lost.cancel()
    with contextlib.suppress(BaseException):
        await lost
    await a.aclose()
    await b.aclose()


async def test_a_retry_of_a_failed_group_is_scored_at_once_with_its_group(
    server: PersistentRedis,
) -> None:
    """The group's scoring failed (its judge call failed): every caller gets the failure at
    once, and a retry of one of its samples re-scores the same group at once, with all its
    samples, instead of opening a new group that waits for its window."""
    a, b = replica(server.url, lease_s=2.0), replica(server.url, lease_s=2.0)
    calls: list[list[str]] = []

    async def flaky(batch: Batch) -> list[Scored]:
        calls.append(list(batch.payloads))
        if len(calls) == 1:
            raise ValueError("judge unavailable")
        return [Scored(f"{p}/{len(batch.payloads)}") for p in batch.payloads]

    failed = await asyncio.gather(
        a.gather("g", entries("a"), expected=2, window_s=60, score=flaky),
        b.gather("g", entries("b"), expected=2, window_s=60, score=flaky),
        return_exceptions=True,
    )
    assert {type(r) for r in failed} == {ValueError, RendezvousFailed}
    again = await asyncio.wait_for(
        b.gather("g", entries("a"), expected=2, window_s=60, score=flaky), 10
    )
    assert again == ["a/2"]
    assert [sorted(c) for c in calls] == [["a", "b"], ["a", "b"]]
    # the other sample's retry is answered from that re-scoring, with no judge call
    assert await a.gather("g", entries("b"), expected=2, window_s=60, score=flaky) == ["b/2"]
    assert len(calls) == 2
    await a.aclose()
    await b.aclose()


async def test_a_draining_replica_hands_over_what_gathers_and_answers_what_it_scores(
    server: PersistentRedis,
) -> None:
    """SIGTERM on replica A (a rolling upgrade): the group A leads that still gathers is
    handed over (B takes it over at once, with A's stored sample), A's caller of it gets a
    retryable `RendezvousDraining` at once and its retry on B waits on the slot it holds (no
    second slot); the group A is scoring is finished and answered before A stops. Nothing is
    lost or scored twice."""
    a, b = replica(server.url, lease_s=30.0), replica(server.url, lease_s=30.0)
    gathering = GatedJudge()
    gathering.release.set()
    x = asyncio.create_task(a.gather("g1", entries("x"), expected=3, window_s=60, score=gathering))
    await asyncio.sleep(0.2)
    y = asyncio.create_task(b.gather("g1", entries("y"), expected=3, window_s=60, score=gathering))
    scoring = GatedJudge()
    held = [
        asyncio.create_task(a.gather("g2", entries(n), expected=2, window_s=60, score=scoring))
        for n in ("p", "q")
    ]
    await asyncio.wait_for(scoring.started.wait(), 10)

    drained = asyncio.create_task(a.drain(grace_s=30))
    with pytest.raises(RendezvousDraining):
        await asyncio.wait_for(x, 5)
    assert not drained.done()  # g2 is still being scored here
    scoring.release.set()
    assert [await t for t in held] == [["p/2"], ["q/2"]]
    await asyncio.wait_for(drained, 10)
    with pytest.raises(RendezvousDraining):  # no new work on a draining replica
        await a.gather("g3", entries("r"), expected=None, window_s=1, score=scoring)

    again = asyncio.create_task(
        b.gather("g1", entries("x"), expected=3, window_s=60, score=gathering)
    )
    z = await asyncio.wait_for(
        b.gather("g1", entries("z"), expected=3, window_s=60, score=gathering), 10
    )
    assert (await again, await y, z) == (["x/3"], ["y/3"], ["z/3"])
    assert [sorted(batch.payloads) for batch in gathering.batches] == [["x", "y", "z"]]
    assert len(scoring.batches) == 1
    await a.aclose()
    await b.aclose()


class JoinsNever(RedisRendezvousStore):
    """Every join fails as in a Redis outage."""

    joins = 0

    async def join(self, group: str, **kwargs: object) -> Joined:
        self.joins += 1
        raise ConnectionError("Redis is down")


async def test_a_join_through_an_outage_gives_up_before_its_callers_deadline(
    server: PersistentRedis,
) -> None:
    """Through an outage a join is tried again for `outage_s` (60 s here), but never past the
    deadline its caller sent (X-Rubricate-Deadline): the caller gets the retryable error
    while it still listens, not a hold it has stopped waiting for."""
    from rubricate.common.deadlines import deadline_scope
    from rubricate.common.rendezvous import RendezvousError

    store = JoinsNever(server.url, retention_s=RETENTION_S, timeout_s=1.0)
    rv = Rendezvous(store, retention_s=RETENTION_S, wait_s=30.0, lease_s=2.0, outage_s=60.0)
    loop = asyncio.get_running_loop()
    began = loop.time()
    with deadline_scope(2.0), pytest.raises(RendezvousError, match="Redis is down"):
        await rv.gather("g", entries("a"), expected=2, window_s=60, score=GatedJudge())
    assert loop.time() - began < 2.0  # gave up before the deadline, with its margin
    assert store.joins >= 3  # tried again meanwhile (0.1, 0.2, 0.4 s apart)
    await rv.aclose()
