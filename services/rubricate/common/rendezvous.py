"""A rendezvous: the parts of one group, sent in separate requests to one gateway replica or
several, are gathered and handled once, and each caller gets back the results of its parts.

A *group* (an opaque name) has at most one *open instance* at a time. `Rendezvous.gather`
adds the caller's entries to it, up to the instance's expected size; the caller that creates
an instance becomes its *leader* and holds a lease on it, renewed while it lives. The leader
waits until the instance is full or its gather window has passed, *seals* it (later entries
open a new instance), hands the sealed entries to the scoring function once, and publishes one
result per entry. Every caller, the leader included, waits for its own entries' results.

- A leader that dies stops renewing its lease; when the lease lapses, a waiting caller claims
  it and finishes the instance (gathering, sealing, scoring) from the stored entries.
- Each entry has a content key. Sealing indexes the entries by key, so an entry sent again
  while its instance is being scored, or after it (for `retention_s`), is answered from that
  instance without being scored again. A failed scoring is published as a failure and not kept
  for retries.
- No entry waits forever: instances expire, and a caller stops waiting after `wait_s`.
- The scoring runs in a task of its own: a caller that goes away (a closed connection) does
  not cancel it, so its retry is answered from the result.

The state lives in Redis when the gateway has one (shared by replicas; a single Redis, not a
cluster), else in process memory (embedded mode, one replica).
"""

import asyncio
import contextlib
import logging
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Final

from redis.exceptions import RedisError

from rubricate.common.redis_client import CancellableRedis, redis_client
from rubricate.common.upstream import deadline_scope

log = logging.getLogger("rubricate.common.rendezvous")

_OK: Final = "ok:"
_ONCE: Final = "once:"
_FAILED: Final = "failed:"
FAILURE_TTL_S: Final = 60.0
"""How long a failed scoring stays visible to the callers still waiting on it."""


@dataclass(frozen=True)
class Entry:
    key: str
    """Content key: an entry sent again with the same key is answered from its first result."""
    payload: str
    """What the scoring function gets (opaque text, e.g. JSON)."""


@dataclass(frozen=True)
class Batch:
    """A sealed instance, as the scoring function gets it."""

    payloads: list[str]
    """The entries, in the order they joined."""
    expected: int
    """The size the instance was waiting for (`len(payloads)` when it filled)."""
    private: bool
    """Gathered from one call only (`gather(expected=None)`)."""


@dataclass(frozen=True)
class Scored:
    text: str
    """The result (opaque text, e.g. JSON)."""
    keep: bool = True
    """False: delivered to the callers waiting for it, but an entry sent again is scored
    anew (an unscored sample is retried, not replayed)."""


Scorer = Callable[[Batch], Awaitable[list[Scored]]]
"""Scores a sealed instance: one result per payload, in order."""


@dataclass(frozen=True)
class Ref:
    group: str
    instance: str
    slot: int


@dataclass(frozen=True)
class Joined:
    instance: str
    first_slot: int
    taken: int
    """How many of the offered entries joined (the rest go to the next instance)."""
    leader: bool


@dataclass(frozen=True)
class Status:
    expected: int
    created_at: float
    """Wall-clock time (`time.time()`) the instance was opened: replicas share it."""
    sealed: bool
    done: bool
    private: bool


class RendezvousError(Exception):
    """The rendezvous store failed or a wait ran out; the caller's request cannot be
    answered (never a reward)."""


class RendezvousFailed(RendezvousError):
    """The instance's scoring failed; its message is the leader's error."""


class RendezvousStore(ABC):
    """The shared state. Every method is atomic."""

    @abstractmethod
    async def join(
        self,
        group: str,
        *,
        instance: str,
        owner: str,
        entries: Sequence[Entry],
        expected: int,
        private: bool,
        lease_s: float,
        ttl_s: float,
    ) -> Joined:
        """Add `entries` to the group's open instance, up to its expected size; when none is
        open, open `instance` with `owner` holding its lease. An instance that reaches its
        expected size is sealed."""

    @abstractmethod
    async def seal(self, group: str, instance: str) -> list[str] | None:
        """Seal the instance (no-op when sealed) and return its payloads; None when it is
        gone."""

    @abstractmethod
    async def status(self, group: str, instance: str) -> Status | None: ...

    @abstractmethod
    async def claim(self, group: str, instance: str, *, owner: str, lease_s: float) -> bool:
        """Take the instance's lease when nobody holds it."""

    @abstractmethod
    async def renew(
        self, group: str, instance: str, *, owner: str, lease_s: float, ttl_s: float
    ) -> bool:
        """Extend `owner`'s lease (False when it lost it) and the instance's lifetime."""

    @abstractmethod
    async def publish(
        self, group: str, instance: str, results: Sequence[str], *, ttl_s: float
    ) -> None:
        """Store one result per slot for `ttl_s`, mark the instance done, and drop its lease
        and its entries."""

    @abstractmethod
    async def results(
        self, group: str, instance: str, slots: Sequence[int]
    ) -> list[str | None]: ...

    @abstractmethod
    async def lookup(self, key: str) -> Ref | None:
        """Where an entry with this content key was sealed."""

    async def aclose(self) -> None:  # noqa: B027 - optional hook
        pass


# ---------------------------------------------------------------- in process


@dataclass
class _Instance:
    expected: int
    created_at: float
    private: bool
    expires: float
    keys: list[str] = field(default_factory=list)
    payloads: list[str] = field(default_factory=list)
    sealed: bool = False
    done: bool = False
    lease: tuple[str, float] | None = None
    results: dict[int, str] = field(default_factory=dict)


class MemoryRendezvousStore(RendezvousStore):
    """One process only: embedded mode and a single gateway replica."""

    def __init__(self, *, retention_s: float) -> None:
        self.retention_s = retention_s
        self._open: dict[str, str] = {}
        self._instances: dict[tuple[str, str], _Instance] = {}
        self._index: dict[str, tuple[Ref, float]] = {}
        self._ops = 0

    def _sweep(self) -> None:
        self._ops += 1
        if self._ops % 256:
            return
        now = time.monotonic()
        for name, inst in list(self._instances.items()):
            if inst.expires < now:
                del self._instances[name]
                if self._open.get(name[0]) == name[1]:
                    del self._open[name[0]]
        for key, (_, until) in list(self._index.items()):
            if until < now:
                del self._index[key]

    def _get(self, group: str, instance: str) -> _Instance | None:
        inst = self._instances.get((group, instance))
        if inst is not None and inst.expires < time.monotonic():
            del self._instances[(group, instance)]
            return None
        return inst

    def _seal(self, group: str, instance: str, inst: _Instance) -> None:
        if inst.sealed:
            return
        inst.sealed = True
        if self._open.get(group) == instance:
            del self._open[group]
        until = time.monotonic() + self.retention_s
        for slot in range(len(inst.keys) - 1, -1, -1):  # the first of equal keys wins
            self._index[inst.keys[slot]] = (Ref(group, instance, slot), until)

    async def join(
        self,
        group: str,
        *,
        instance: str,
        owner: str,
        entries: Sequence[Entry],
        expected: int,
        private: bool,
        lease_s: float,
        ttl_s: float,
    ) -> Joined:
        self._sweep()
        now = time.monotonic()
        current = self._open.get(group)
        inst = self._get(group, current) if current is not None else None
        leader = inst is None
        if inst is None or current is None:
            current = instance
            inst = _Instance(
                expected=expected,
                created_at=time.time(),
                private=private,
                expires=now + ttl_s,
                lease=(owner, now + lease_s),
            )
            self._instances[(group, current)] = inst
            self._open[group] = current
        first = len(inst.keys)
        taken = max(0, min(len(entries), inst.expected - first))
        for entry in entries[:taken]:
            inst.keys.append(entry.key)
            inst.payloads.append(entry.payload)
        if len(inst.keys) >= inst.expected:
            self._seal(group, current, inst)
        return Joined(instance=current, first_slot=first, taken=taken, leader=leader)

    async def seal(self, group: str, instance: str) -> list[str] | None:
        inst = self._get(group, instance)
        if inst is None:
            return None
        self._seal(group, instance, inst)
        return list(inst.payloads)

    async def status(self, group: str, instance: str) -> Status | None:
        inst = self._get(group, instance)
        if inst is None:
            return None
        return Status(
            expected=inst.expected,
            created_at=inst.created_at,
            sealed=inst.sealed,
            done=inst.done,
            private=inst.private,
        )

    async def claim(self, group: str, instance: str, *, owner: str, lease_s: float) -> bool:
        inst = self._get(group, instance)
        now = time.monotonic()
        if inst is None or inst.done or (inst.lease is not None and inst.lease[1] > now):
            return False
        inst.lease = (owner, now + lease_s)
        return True

    async def renew(
        self, group: str, instance: str, *, owner: str, lease_s: float, ttl_s: float
    ) -> bool:
        inst = self._get(group, instance)
        now = time.monotonic()
        if inst is None or inst.lease is None or inst.lease[0] != owner or inst.lease[1] < now:
            return False
        inst.lease = (owner, now + lease_s)
        inst.expires = max(inst.expires, now + ttl_s)
        return True

    async def publish(
        self, group: str, instance: str, results: Sequence[str], *, ttl_s: float
    ) -> None:
        inst = self._get(group, instance)
        if inst is None:
            return
        inst.results = dict(enumerate(results))
        inst.done = True
        inst.lease = None
        inst.keys, inst.payloads = [], []  # scored: only the results are kept
        inst.expires = time.monotonic() + ttl_s

    async def results(self, group: str, instance: str, slots: Sequence[int]) -> list[str | None]:
        inst = self._get(group, instance)
        if inst is None:
            return [None] * len(slots)
        return [inst.results.get(s) for s in slots]

    async def lookup(self, key: str) -> Ref | None:
        entry = self._index.get(key)
        if entry is None or entry[1] < time.monotonic():
            return None
        return entry[0]


# ---------------------------------------------------------------- Redis

# Keys (prefix P, group G, instance I; one Redis, the scripts name keys they derive):
#   P G :open            the open instance of G
#   P G : I :meta        hash expected, created, sealed, done, private
#   P G : I :k / :m      lists of the entries' content keys and payloads
#   P G : I :lease       the leader's owner id (PX lease)
#   P G : I :r           hash slot -> result
#   P c: key             "G|I|slot": where the content key was sealed

_SEAL_FN = """
local function seal(pg, group, inst, cprefix, retention_ms)
  local meta = pg .. inst .. ':meta'
  if redis.call('HGET', meta, 'sealed') == '1' then return end
  redis.call('HSET', meta, 'sealed', '1')
  if redis.call('GET', pg .. 'open') == inst then redis.call('DEL', pg .. 'open') end
  local keys = redis.call('LRANGE', pg .. inst .. ':k', 0, -1)
  for j = #keys, 1, -1 do
    redis.call('SET', cprefix .. keys[j], group .. '|' .. inst .. '|' .. (j - 1),
               'PX', retention_ms)
  end
end
"""

# ARGV: pg, group, new instance, owner, expected, private, lease_ms, ttl_ms, now, cprefix,
#       retention_ms, n, then n keys and n payloads
_JOIN = (
    _SEAL_FN
    + """
local pg, group = ARGV[1], ARGV[2]
local inst = redis.call('GET', pg .. 'open')
local leader = 0
if inst and redis.call('EXISTS', pg .. inst .. ':meta') == 0 then inst = false end
if not inst then
  inst = ARGV[3]
  leader = 1
  redis.call('SET', pg .. 'open', inst, 'PX', ARGV[8])
  redis.call('HSET', pg .. inst .. ':meta', 'expected', ARGV[5], 'created', ARGV[9],
             'sealed', '0', 'done', '0', 'private', ARGV[6])
  redis.call('PEXPIRE', pg .. inst .. ':meta', ARGV[8])
  redis.call('SET', pg .. inst .. ':lease', ARGV[4], 'PX', ARGV[7])
end
local expected = tonumber(redis.call('HGET', pg .. inst .. ':meta', 'expected'))
local size = redis.call('LLEN', pg .. inst .. ':k')
local n = tonumber(ARGV[12])
local take = math.max(0, math.min(n, expected - size))
for j = 1, take do
  redis.call('RPUSH', pg .. inst .. ':k', ARGV[12 + j])
  redis.call('RPUSH', pg .. inst .. ':m', ARGV[12 + n + j])
end
if take > 0 then
  redis.call('PEXPIRE', pg .. inst .. ':k', ARGV[8])
  redis.call('PEXPIRE', pg .. inst .. ':m', ARGV[8])
end
if size + take >= expected then seal(pg, group, inst, ARGV[10], ARGV[11]) end
return {inst, size, take, leader}
"""
)

# ARGV: pg, group, inst, cprefix, retention_ms
_SEAL = (
    _SEAL_FN
    + """
if redis.call('EXISTS', ARGV[1] .. ARGV[3] .. ':meta') == 0 then return false end
seal(ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5])
return redis.call('LRANGE', ARGV[1] .. ARGV[3] .. ':m', 0, -1)
"""
)

# KEYS: meta, lease; ARGV: owner, lease_ms
_CLAIM = """
if redis.call('EXISTS', KEYS[1]) == 0 or redis.call('HGET', KEYS[1], 'done') == '1' then
  return 0
end
if redis.call('SET', KEYS[2], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end
return 0
"""

# KEYS: lease, meta, k, m; ARGV: owner, lease_ms, ttl_ms
_RENEW = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
for i = 2, 4 do
  if redis.call('PTTL', KEYS[i]) < tonumber(ARGV[3]) then
    redis.call('PEXPIRE', KEYS[i], ARGV[3])
  end
end
return 1
"""

# KEYS: r, meta, lease, k, m; ARGV: ttl_ms, then slot/result pairs
_PUBLISH = """
if redis.call('EXISTS', KEYS[2]) == 0 then return 0 end
for i = 2, #ARGV, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
redis.call('HSET', KEYS[2], 'done', '1')
redis.call('DEL', KEYS[3], KEYS[4], KEYS[5])  -- the lease, and the entries: scored
redis.call('PEXPIRE', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[2], ARGV[1])
return 1
"""


class RedisRendezvousStore(RendezvousStore):
    """Shared by every gateway replica (one Redis; the scripts derive the keys they touch,
    which a Redis Cluster would not allow)."""

    def __init__(
        self,
        url: str,
        *,
        retention_s: float,
        prefix: str = "rubricate:rv:",
        timeout_s: float = 5.0,
    ) -> None:
        self._redis: CancellableRedis = redis_client(url, timeout_s=timeout_s)
        self.retention_s = retention_s
        self._prefix = prefix
        self._join = self._redis.register_script(_JOIN)
        self._seal = self._redis.register_script(_SEAL)
        self._claim = self._redis.register_script(_CLAIM)
        self._renew = self._redis.register_script(_RENEW)
        self._publish = self._redis.register_script(_PUBLISH)

    def _pg(self, group: str) -> str:
        return f"{self._prefix}{group}:"

    def _key(self, group: str, instance: str, part: str) -> str:
        return f"{self._pg(group)}{instance}:{part}"

    async def join(
        self,
        group: str,
        *,
        instance: str,
        owner: str,
        entries: Sequence[Entry],
        expected: int,
        private: bool,
        lease_s: float,
        ttl_s: float,
    ) -> Joined:
        args: list[str | int | float] = [
            self._pg(group),
            group,
            instance,
            owner,
            expected,
            "1" if private else "0",
            _ms(lease_s),
            _ms(ttl_s),
            repr(time.time()),
            self._prefix + "c:",
            _ms(self.retention_s),
            len(entries),
            *(e.key for e in entries),
            *(e.payload for e in entries),
        ]
        inst, size, take, leader = await self._join(keys=[], args=args)
        return Joined(
            instance=str(inst), first_slot=int(size), taken=int(take), leader=bool(int(leader))
        )

    async def seal(self, group: str, instance: str) -> list[str] | None:
        args: list[str | int] = [
            self._pg(group),
            group,
            instance,
            self._prefix + "c:",
            _ms(self.retention_s),
        ]
        payloads = await self._seal(keys=[], args=args)
        return None if payloads is None else [str(p) for p in payloads]

    async def status(self, group: str, instance: str) -> Status | None:
        meta = await self._redis.hgetall(self._key(group, instance, "meta"))
        if not meta:
            return None
        return Status(
            expected=int(meta["expected"]),
            created_at=float(meta["created"]),
            sealed=meta.get("sealed") == "1",
            done=meta.get("done") == "1",
            private=meta.get("private") == "1",
        )

    async def claim(self, group: str, instance: str, *, owner: str, lease_s: float) -> bool:
        keys = [self._key(group, instance, "meta"), self._key(group, instance, "lease")]
        return bool(await self._claim(keys=keys, args=[owner, _ms(lease_s)]))

    async def renew(
        self, group: str, instance: str, *, owner: str, lease_s: float, ttl_s: float
    ) -> bool:
        keys = [self._key(group, instance, p) for p in ("lease", "meta", "k", "m")]
        return bool(await self._renew(keys=keys, args=[owner, _ms(lease_s), _ms(ttl_s)]))

    async def publish(
        self, group: str, instance: str, results: Sequence[str], *, ttl_s: float
    ) -> None:
        keys = [self._key(group, instance, p) for p in ("r", "meta", "lease", "k", "m")]
        pairs = [x for slot, result in enumerate(results) for x in (str(slot), result)]
        await self._publish(keys=keys, args=[_ms(ttl_s), *pairs])

    async def results(self, group: str, instance: str, slots: Sequence[int]) -> list[str | None]:
        if not slots:
            return []
        values = await self._redis.hmget(self._key(group, instance, "r"), [str(s) for s in slots])
        return [v if isinstance(v, str) else None for v in values]

    async def lookup(self, key: str) -> Ref | None:
        value = await self._redis.get(self._prefix + "c:" + key)
        if not isinstance(value, str):
            return None
        group, instance, slot = value.rsplit("|", 2)
        return Ref(group, instance, int(slot))

    async def aclose(self) -> None:
        await self._redis.aclose()


def _ms(seconds: float) -> int:
    return max(1, int(seconds * 1000))


# ---------------------------------------------------------------- the protocol


class Rendezvous:
    def __init__(
        self,
        store: RendezvousStore,
        *,
        retention_s: float,
        wait_s: float,
        lease_s: float = 30.0,
        poll_s: float = 0.05,
    ) -> None:
        if retention_s <= 0 or wait_s <= 0 or lease_s <= 0 or poll_s <= 0:
            raise ValueError("retention_s, wait_s, lease_s and poll_s must be positive")
        self.store = store
        self.retention_s = retention_s
        self.wait_s = wait_s
        self.lease_s = lease_s
        self.poll_s = poll_s
        self._tasks: set[asyncio.Task[None]] = set()
        self._errors: dict[tuple[str, str], BaseException] = {}

    @property
    def _ttl_s(self) -> float:
        """Lifetime of an instance's entries, renewed by its leader while it works."""
        return self.wait_s + self.lease_s

    async def gather(
        self,
        group: str,
        entries: Sequence[Entry],
        *,
        expected: int | None,
        window_s: float,
        score: Scorer,
    ) -> list[str]:
        """The result of each entry, in order. `expected`: the group's size (joined with
        other callers' entries of `group`); None: the entries are the whole group."""
        try:
            return await self._gather(
                group, entries, expected=expected, window_s=window_s, score=score
            )
        except (RedisError, OSError) as exc:  # the store is unreachable
            raise RendezvousError(f"{type(exc).__name__}: {exc}") from exc

    async def _gather(
        self,
        group: str,
        entries: Sequence[Entry],
        *,
        expected: int | None,
        window_s: float,
        score: Scorer,
    ) -> list[str]:
        refs: list[Ref | None] = [None] * len(entries)
        for i, entry in enumerate(entries):
            ref = await self.store.lookup(entry.key)
            if ref is not None and await self._answerable(ref):
                refs[i] = ref
        todo = [i for i, ref in enumerate(refs) if ref is None]
        if todo and expected is None:  # a group of its own, sealed as it opens
            group = f"{group}.{uuid.uuid4().hex[:16]}"
            expected = len(todo)
            private = True
        else:
            private = False
        while todo:
            assert expected is not None
            owner = uuid.uuid4().hex
            joined = await self.store.join(
                group,
                instance=uuid.uuid4().hex[:16],
                owner=owner,
                entries=[entries[i] for i in todo],
                expected=expected,
                private=private,
                lease_s=self.lease_s,
                ttl_s=window_s + self._ttl_s,
            )
            if joined.taken == 0:
                raise RendezvousError(f"group {group[:16]} took none of {len(todo)} entries")
            if joined.leader:
                self._lead(group, joined.instance, owner=owner, window_s=window_s, score=score)
            for offset, i in enumerate(todo[: joined.taken]):
                refs[i] = Ref(group, joined.instance, joined.first_slot + offset)
            todo = todo[joined.taken :]
        return await self._wait([r for r in refs if r is not None], window_s, score)

    async def _answerable(self, ref: Ref) -> bool:
        """A sealed entry that has, or will have, a result to keep (not a failed, unkept or
        expired one)."""
        (result,) = await self.store.results(ref.group, ref.instance, [ref.slot])
        if result is not None:
            return result.startswith(_OK)
        status = await self.store.status(ref.group, ref.instance)
        return status is not None and not status.done

    async def _wait(self, refs: Sequence[Ref], window_s: float, score: Scorer) -> list[str]:
        out: dict[Ref, str] = {}
        deadline = time.monotonic() + window_s + self.wait_s
        while True:
            missing = [r for r in refs if r not in out]
            by_instance: dict[tuple[str, str], list[Ref]] = {}
            for ref in missing:
                by_instance.setdefault((ref.group, ref.instance), []).append(ref)
            for (group, instance), waiting in by_instance.items():
                found = await self.store.results(group, instance, [r.slot for r in waiting])
                for ref, result in zip(waiting, found, strict=True):
                    if result is None:
                        continue
                    if result.startswith(_FAILED):
                        error = self._errors.get((group, instance))
                        if error is not None:
                            raise error
                        raise RendezvousFailed(result[len(_FAILED) :])
                    out[ref] = result.partition(":")[2]
                if any(r not in out for r in waiting):
                    owner = uuid.uuid4().hex
                    if await self.store.claim(group, instance, owner=owner, lease_s=self.lease_s):
                        log.warning("rendezvous.takeover group=%.16s instance=%s", group, instance)
                        self._lead(group, instance, owner=owner, window_s=window_s, score=score)
            if all(r in out for r in refs):  # equal entries of one call share a ref
                return [out[r] for r in refs]
            if time.monotonic() >= deadline:
                raise RendezvousError(
                    f"the group was not scored within {window_s + self.wait_s:.0f}s"
                )
            await asyncio.sleep(self.poll_s)

    def _lead(
        self, group: str, instance: str, *, owner: str, window_s: float, score: Scorer
    ) -> None:
        """Run the instance in a task of its own (a closed connection does not cancel it),
        without the leading request's deadline: the group is scored for every member, and a
        member's deadline bounds only its own wait."""
        with deadline_scope(None, replace=True):  # the task copies this context
            task = asyncio.create_task(
                self._run(group, instance, owner=owner, window_s=window_s, score=score),
                name=f"rendezvous-{instance}",
            )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(
        self, group: str, instance: str, *, owner: str, window_s: float, score: Scorer
    ) -> None:
        heartbeat = asyncio.create_task(self._heartbeat(group, instance, owner))
        try:
            status = await self.store.status(group, instance)
            if status is None or status.done:
                return
            while not status.sealed:
                left = status.created_at + window_s - time.time()
                if left <= 0:
                    break
                await asyncio.sleep(min(self.poll_s, left))
                if (status := await self.store.status(group, instance)) is None:
                    return
            payloads = await self.store.seal(group, instance)
            if payloads is None:
                return
            batch = Batch(
                payloads=payloads,
                expected=len(payloads) if status.private else status.expected,
                private=status.private,
            )
            try:
                results = [(_OK if r.keep else _ONCE) + r.text for r in await score(batch)]
                ttl_s = self.retention_s
                if len(results) != len(payloads):
                    raise RuntimeError(f"{len(results)} results for {len(payloads)} entries")
            except Exception as exc:
                log.warning(
                    "rendezvous.score_failed group=%.16s instance=%s error=%s",
                    group,
                    instance,
                    f"{type(exc).__name__}: {exc}"[:300],
                )
                self._errors[(group, instance)] = exc
                asyncio.get_running_loop().call_later(
                    FAILURE_TTL_S, self._errors.pop, (group, instance), None
                )
                results = [_FAILED + f"{type(exc).__name__}: {exc}"[:500]] * len(payloads)
                ttl_s = FAILURE_TTL_S
            await self.store.publish(group, instance, results, ttl_s=ttl_s)
        except Exception as exc:  # the store failed: the lease lapses, a waiter takes over
            log.warning(
                "rendezvous.lead_failed group=%.16s instance=%s error=%s",
                group,
                instance,
                f"{type(exc).__name__}: {exc}"[:300],
            )
        finally:
            heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await heartbeat

    async def _heartbeat(self, group: str, instance: str, owner: str) -> None:
        while True:
            await asyncio.sleep(self.lease_s / 3)
            try:
                if not await self.store.renew(
                    group, instance, owner=owner, lease_s=self.lease_s, ttl_s=self._ttl_s
                ):
                    log.warning("rendezvous.lease_lost group=%.16s instance=%s", group, instance)
                    return
            except Exception as exc:
                log.warning("rendezvous.renew_failed instance=%s error=%s", instance, exc)

    async def aclose(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await self.store.aclose()
