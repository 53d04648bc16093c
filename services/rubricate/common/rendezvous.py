"""A rendezvous: the parts of one group, sent in separate requests to one gateway replica or
several, are gathered and handled once, and each caller gets back the results of its parts.

A *group* (an opaque name) has at most one *open instance* at a time. `Rendezvous.gather`
adds the caller's entries to it, up to the instance's expected size; the caller that creates
an instance becomes its *leader* and holds a lease on it, renewed while it lives. The leader
waits until the instance is full or its gather window has passed, *seals* it (later entries
open a new instance), hands the sealed entries to the scoring function once, and publishes one
result per entry. Every caller, the leader included, waits for its own entries' results.

Waiting costs nothing per caller: nobody polls.
- The store *signals* an instance when it is sealed and when its results are published (in
  process: directly; on Redis: one pub/sub channel per store, read by one connection per
  replica). The leader sleeps until its instance is signalled or its window ends.
- The callers of one replica that wait on one instance share one *watch*: it reads their
  results once when the instance is signalled, and checks the leader's lease once per lease
  period (a lost signal costs at most that long). So a waiting sample issues no Redis
  command of its own, whatever the wait: joining is one command per request, and the rest is
  a handful per instance.
- A leader that dies loses its lease; the first watch that checks then claims it (one
  atomic claim: one replica takes over, once) and finishes the instance (gathering, sealing,
  scoring) from the stored entries. On Redis a lease names the leader's replica, and each
  replica keeps one liveness key under a short lease (renewed every `lease_s / 3`: one
  command per replica, whatever the groups it leads): a lease whose replica is no longer
  live is free. In process, each lease is renewed by its leader.
- Each entry has a content key. An entry whose key is already in an open or scored instance
  (a retry: the trainer timed out and posted the sample again) attaches to that slot instead
  of joining again, and is answered from its result; a result is kept for `retention_s`. A
  failed scoring is published as a failure and not kept for retries. Equal entries of one call
  take a slot each (two rollouts of a group may be the same text); equal entries of separate
  calls are one sample sent twice.
- No entry waits forever: instances expire, and a caller stops waiting after its window plus
  `wait_s`.
- No instance is orphaned by a store outage (issue 33). Every store call is tried again
  through an outage: a join or a watch for `outage_s` (then its callers get a
  `RendezvousError`, a retryable 503; a join no longer than its caller's deadline allows),
  a leader for its instance's lifetime, keeping the results it scored (published once the
  store answers, never scored again). A join whose answer was lost is tried again and finds
  the instance it opened: it leads it. A leader that gives up resigns its lease as soon as
  the store answers, and a resignation signals the instance, so a watch takes over at once.
  After an outage no lease is claimed for a whole lease (live replicas renew the liveness
  that lapsed meanwhile, three times over at their `lease_s / 3` period, however loaded the
  machine; the signal listener renews its own before it wakes every local waiter to
  re-check: signals sent while it was away are lost). A scoring that failed is delivered to
  its callers as a failure and keeps its entries: a retry of one of its samples scores the
  same group again at once (not a new group that waits for its window), and the first
  results published stand.
- The scoring runs in a task of its own: a caller that goes away (a closed connection) does
  not cancel it, so its retry is answered from the result.
- A replica that shuts down hands the instances it gathers over (`drain`), when another
  replica is live to take them (`alone`: on Redis, a set lists the replicas that keep a
  liveness key). The only live replica has nobody to hand over to: the gateway keeps it
  serving until it is idle (`busy`) before it drains (`rubricate.gateway.drain`).

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
from typing import Any, Final, TypeVar

from redis.exceptions import RedisError

from rubricate.common.deadlines import deadline_scope, time_left
from rubricate.common.detached import detached
from rubricate.common.metrics import GROUP_WAITERS
from rubricate.common.redis_client import CancellableRedis, redis_client

log = logging.getLogger("rubricate.common.rendezvous")
T = TypeVar("T")

_OK: Final = "ok:"
_ONCE: Final = "once:"
_FAILED: Final = "failed:"
FAILURE_TTL_S: Final = 60.0
"""How long a failed scoring stays visible to the callers still waiting on it."""
RETRY_FIRST_S: Final = 0.1
RETRY_MAX_S: Final = 1.0
"""Pauses between the tries of a store call through an outage (doubling from the first)."""
DEADLINE_MARGIN_S: Final = 0.5
"""A caller's join stops trying through an outage this long before its deadline
(`X-Rubricate-Deadline`), so that it gets the retryable 503 while it still listens."""
SIGNAL_MEMORY_S: Final = 3600.0
"""How long a replica remembers that an instance was signalled (a caller that registers just
after the signal still sees it)."""


@dataclass(frozen=True)
class Entry:
    key: str
    """Content key: an entry sent again with the same key is answered from its first slot."""
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
    refs: list[Ref]
    """Where each of the first `len(refs)` offered entries is: a new slot of the open
    instance, or the slot an equal entry already holds (the rest go to the next instance)."""
    instance: str
    """The open instance the new slots joined."""
    leader: bool
    """The call opened `instance` and holds its lease."""


@dataclass(frozen=True)
class Status:
    expected: int
    created_at: float
    """Wall-clock time (`time.time()`) the instance was opened: replicas share it."""
    sealed: bool
    done: bool
    private: bool


@dataclass(frozen=True)
class Check:
    """What a watch learns of an instance in one store call."""

    results: list[str | None]
    """The stored result of each asked slot (None: not yet)."""
    gone: bool
    """The instance expired or never existed."""
    claimed: bool
    """Its lease had lapsed and the caller now holds it."""


class RendezvousError(Exception):
    """The rendezvous store failed or a wait ran out; the caller's request cannot be
    answered (never a reward)."""


class RendezvousFailed(RendezvousError):
    """The instance's scoring failed; its message is the leader's error."""


class RendezvousDraining(RendezvousError):
    """This replica is shutting down and holds no result for the caller yet: the caller
    retries (on another replica), where its samples wait on the slots they already hold."""


# ---------------------------------------------------------------- signals


class Signals:
    """Wake-ups of one replica by instance: a count per instance, and the tasks waiting for it
    to grow. Counts are remembered for `SIGNAL_MEMORY_S`, so a task that looks after the
    signal was given still sees it."""

    def __init__(self) -> None:
        self._counts: dict[tuple[str, str], tuple[int, float]] = {}
        self._waiters: dict[tuple[str, str], list[asyncio.Future[None]]] = {}
        self._fired = 0

    def fire(self, group: str, instance: str) -> None:
        key = (group, instance)
        count, _ = self._counts.get(key, (0, 0.0))
        self._counts[key] = (count + 1, time.monotonic())
        for future in self._waiters.pop(key, []):
            if not future.done():
                future.set_result(None)
        self._fired += 1
        if self._fired % 1024 == 0:
            self._forget_old()

    def fire_all(self) -> None:
        """Wake every waiter (a lost connection may have dropped signals)."""
        for group, instance in list(self._waiters):
            self.fire(group, instance)

    def count(self, group: str, instance: str) -> int:
        return self._counts.get((group, instance), (0, 0.0))[0]

    async def wait(self, group: str, instance: str, *, seen: int, within_s: float) -> int:
        """The signal count once it is above `seen`, or after `within_s` seconds."""
        key = (group, instance)
        if self.count(group, instance) > seen or within_s <= 0:
            return self.count(group, instance)
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(key, []).append(future)
        try:
            async with asyncio.timeout(within_s):
                await future
        except TimeoutError:
            pass
        finally:
            waiting = self._waiters.get(key)
            if waiting is not None and future in waiting:
                waiting.remove(future)
                if not waiting:
                    del self._waiters[key]
        return self.count(group, instance)

    def _forget_old(self) -> None:
        cutoff = time.monotonic() - SIGNAL_MEMORY_S
        for key, (_, at) in list(self._counts.items()):
            if at < cutoff and key not in self._waiters:
                del self._counts[key]


# ---------------------------------------------------------------- the store


class RendezvousStore(ABC):
    """The shared state. Every method is atomic. `signals` is woken when an instance is sealed
    or its results are published, by any replica."""

    signals: Signals
    replica: str
    """This store's replica: the prefix of the owner ids its leaders hold leases with."""
    leases_renewed_per_instance: bool = True
    """Whether a leader renews its instance's lease itself (`renew`); False when the store
    keeps leases live per replica (`start`)."""
    reconnected_at: float = float("-inf")
    """When (`time.monotonic()`) the store last came back after losing its connection: leases
    that lapsed meanwhile may belong to live replicas that have not renewed yet."""

    async def start(self, *, lease_s: float) -> None:  # noqa: B027 - optional hook
        """Start receiving signals and keeping this replica's leases (called before the
        first join)."""

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
        """Place `entries` in order: an entry whose content key is in an open instance or in a
        scored one whose result is kept attaches to that slot; the others join the group's open
        instance, up to its expected size. When none is open, open `instance` with `owner`
        holding its lease. An instance that reaches its expected size is sealed (and
        signalled). Stops after the entry that fills the instance."""

    @abstractmethod
    async def seal(self, group: str, instance: str, *, ttl_s: float) -> list[str] | None:
        """Seal the instance (no-op when sealed) and return its payloads; None when it is
        gone or scored. The instance lives at least `ttl_s` more (its scoring)."""

    @abstractmethod
    async def status(self, group: str, instance: str) -> Status | None: ...

    @abstractmethod
    async def check(
        self,
        group: str,
        instance: str,
        slots: Sequence[int],
        *,
        owner: str,
        lease_s: float,
        claim: bool = True,
    ) -> Check:
        """The slots' results; with `claim`, when the instance is not done and nobody holds
        its lease, `owner` takes it."""

    @abstractmethod
    async def renew(
        self, group: str, instance: str, *, owner: str, lease_s: float, ttl_s: float
    ) -> bool:
        """Extend `owner`'s lease (False when it lost it) and the instance's lifetime."""

    @abstractmethod
    async def publish(
        self, group: str, instance: str, results: Sequence[str], *, ttl_s: float
    ) -> bool:
        """Store one result per slot for `ttl_s`, mark the instance done, drop its lease and
        its entries, and signal it. False (nothing written) when it is gone or already done:
        the first results published stand."""

    @abstractmethod
    async def fail(self, group: str, instance: str, results: Sequence[str]) -> None:
        """Its scoring failed: store the failure as each slot's result and signal it (the
        callers waiting get it at once), drop the lease and keep the entries. The next entry
        that attaches to one of its slots (a retry) clears the failure, and its watch claims
        the instance and scores it again, whole, at once (not a new group waiting for its
        window). Nobody claims a failed instance before such a retry."""

    @abstractmethod
    async def resign(self, group: str, instance: str, *, owner: str) -> None:
        """Give up `owner`'s lease (its leader stopped before publishing) and signal the
        instance: the watches waiting on it check at once, and one takes over."""

    async def peers(self) -> int:
        """How many other gateway replicas share this store and are live (in process:
        none). A draining replica that has no peer serves on instead of handing over."""
        return 0

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
    failed: bool = False


class MemoryRendezvousStore(RendezvousStore):
    """One process only: embedded mode and a single gateway replica."""

    def __init__(self, *, retention_s: float) -> None:
        self.retention_s = retention_s
        self.signals = Signals()
        self.replica = uuid.uuid4().hex[:16]
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
        self.signals.fire(group, instance)

    def _attachable(self, key: str) -> Ref | None:
        found = self._index.get(key)
        if found is None or found[1] < time.monotonic():
            return None
        ref = found[0]
        inst = self._get(ref.group, ref.instance)
        if inst is None:
            return None
        if inst.failed:  # a retry of a failed scoring: scored again, at once
            inst.failed, inst.results, inst.lease = False, {}, None
            return ref
        if not inst.done:
            return ref
        result = inst.results.get(ref.slot)
        return ref if result is not None and result.startswith(_OK) else None

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
        leader = False
        refs: list[Ref] = []
        added: set[str] = set()
        for entry in entries:
            ref = None if entry.key in added else self._attachable(entry.key)
            if ref is not None:
                refs.append(ref)
                continue
            if inst is None or current is None:
                current, leader = instance, True
                inst = _Instance(
                    expected=expected,
                    created_at=time.time(),
                    private=private,
                    expires=now + ttl_s,
                    lease=(owner, now + lease_s),
                )
                self._instances[(group, current)] = inst
                self._open[group] = current
            ref = Ref(group, current, len(inst.keys))
            inst.keys.append(entry.key)
            inst.payloads.append(entry.payload)
            if entry.key not in added:
                self._index[entry.key] = (ref, now + ttl_s + self.retention_s)
                added.add(entry.key)
            refs.append(ref)
            if len(inst.keys) >= inst.expected:
                self._seal(group, current, inst)
                break
        return Joined(refs=refs, instance=current or instance, leader=leader)

    async def seal(self, group: str, instance: str, *, ttl_s: float) -> list[str] | None:
        inst = self._get(group, instance)
        if inst is None or inst.done:
            return None
        self._seal(group, instance, inst)
        inst.expires = max(inst.expires, time.monotonic() + ttl_s)
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

    async def check(
        self,
        group: str,
        instance: str,
        slots: Sequence[int],
        *,
        owner: str,
        lease_s: float,
        claim: bool = True,
    ) -> Check:
        inst = self._get(group, instance)
        if inst is None:
            return Check(results=[None] * len(slots), gone=True, claimed=False)
        results = [inst.results.get(s) for s in slots]
        now = time.monotonic()
        claimed = False
        free = inst.lease is None or inst.lease[1] <= now
        if claim and not inst.done and not inst.failed and free:
            inst.lease = (owner, now + lease_s)
            claimed = True
        return Check(results=results, gone=False, claimed=claimed)

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

    async def fail(self, group: str, instance: str, results: Sequence[str]) -> None:
        inst = self._get(group, instance)
        if inst is None or inst.done:
            return
        inst.results = dict(enumerate(results))
        inst.failed = True
        inst.lease = None
        self.signals.fire(group, instance)

    async def resign(self, group: str, instance: str, *, owner: str) -> None:
        inst = self._get(group, instance)
        if inst is not None and inst.lease is not None and inst.lease[0] == owner:
            inst.lease = None
            self.signals.fire(group, instance)

    async def publish(
        self, group: str, instance: str, results: Sequence[str], *, ttl_s: float
    ) -> bool:
        inst = self._get(group, instance)
        if inst is None or inst.done:
            return False
        inst.results = dict(enumerate(results))
        inst.done = True
        inst.lease = None
        inst.keys, inst.payloads = [], []  # scored: only the results are kept
        inst.expires = time.monotonic() + ttl_s
        self.signals.fire(group, instance)
        return True


# ---------------------------------------------------------------- Redis

# Keys (prefix P, group G, instance I; one Redis, the scripts name keys they derive):
#   P G :open          the open instance of G
#   P G : I            hash: expected, created, sealed, done, private, n (slots),
#                      m<slot> (payload), r<slot> (result)
#   P G : I :lease     the leader's owner id, "<replica>.<id>" (lives as long as the instance)
#   P live: R          replica R is live (PX lease, renewed every lease / 3)
#   P replicas         set of the replicas that kept a liveness key (pruned by `peers`)
#   P c: key           "G|I|slot": the slot that holds the content key
#   P ev               the pub/sub channel: "G|I" when I is sealed or done

# ARGV: P, G, new instance, owner, expected, private, lease_ms, ttl_ms, now, retention_ms,
#       n, then n keys and n payloads. Returns {instance, leader, refs...} where each ref is
#       "G|I|slot" (processing stops after the entry that fills the instance).
_JOIN = """
local P, G = ARGV[1], ARGV[2]
local ttl, n = tonumber(ARGV[8]), tonumber(ARGV[11])
local pg = P .. G .. ':'
local inst = redis.call('GET', pg .. 'open')
local leader, size, expected = 0, 0, 0
if inst then
  local meta = redis.call('HMGET', pg .. inst, 'n', 'expected')
  if meta[1] then size, expected = tonumber(meta[1]), tonumber(meta[2]) else inst = false end
end
local out, added, fields = {}, {}, {}
for j = 1, n do
  local key = ARGV[11 + j]
  local ref, claimed = false, false
  if not added[key] then
    -- the slot this entry would take; the content key points at it unless it exists already
    local here = G .. '|' .. (inst or ARGV[3]) .. '|' .. size
    ref = redis.call('SET', P .. 'c:' .. key, here, 'NX', 'PX', ttl + tonumber(ARGV[10]), 'GET')
    claimed = not ref
    if ref then
      local g, i, s = string.match(ref, '^(.*)|([^|]*)|([^|]*)$')
      local h = P .. g .. ':' .. i
      local state = redis.call('HMGET', h, 'done', 'r' .. s, 'failed', 'n')
      if not state[1] then ref = false
      elseif state[1] == '1' and (not state[2] or string.sub(state[2], 1, 3) ~= 'ok:') then
        ref = false
      elseif state[3] == '1' then
        -- its scoring failed: this retry clears the failure, and its watch scores it again
        local drop = {}
        for x = 0, tonumber(state[4]) - 1 do drop[#drop + 1] = 'r' .. x end
        if #drop > 0 then redis.call('HDEL', h, unpack(drop)) end
        redis.call('HSET', h, 'failed', '0')
        redis.call('DEL', h .. ':lease')
      end
    end
  end
  if ref then
    out[#out + 1] = ref
  else
    if not inst then
      inst, leader, size, expected = ARGV[3], 1, 0, tonumber(ARGV[5])
      redis.call('SET', pg .. 'open', inst, 'PX', ttl)
      redis.call('HSET', pg .. inst, 'expected', expected, 'created', ARGV[9], 'sealed', '0',
                 'done', '0', 'private', ARGV[6], 'n', 0)
      redis.call('PEXPIRE', pg .. inst, ttl)
      redis.call('SET', pg .. inst .. ':lease', ARGV[4], 'PX', ttl)
    end
    local slot = size
    size = size + 1
    fields[#fields + 1] = 'm' .. slot
    fields[#fields + 1] = ARGV[11 + n + j]
    local here = G .. '|' .. inst .. '|' .. slot
    if not added[key] then
      if not claimed then  -- it pointed at a stale slot
        redis.call('SET', P .. 'c:' .. key, here, 'PX', ttl + tonumber(ARGV[10]))
      end
      added[key] = true
    end
    out[#out + 1] = here
    if size >= expected then break end
  end
end
if #fields > 0 then
  fields[#fields + 1] = 'n'
  fields[#fields + 1] = size
  redis.call('HSET', pg .. inst, unpack(fields))
  if size >= expected then
    redis.call('HSET', pg .. inst, 'sealed', '1')
    redis.call('DEL', pg .. 'open')
    redis.call('PUBLISH', P .. 'ev', G .. '|' .. inst)
  end
end
return {inst or ARGV[3], leader, unpack(out)}
"""

# KEYS: instance hash, open, lease; ARGV: inst, channel, message, ttl_ms (what the instance
# and its lease live from now: its scoring). Returns the payloads, or nil.
_SEAL = """
if redis.call('EXISTS', KEYS[1]) == 0 or redis.call('HGET', KEYS[1], 'done') == '1' then
  return false
end
if redis.call('HGET', KEYS[1], 'sealed') ~= '1' then
  redis.call('HSET', KEYS[1], 'sealed', '1')
  if redis.call('GET', KEYS[2]) == ARGV[1] then redis.call('DEL', KEYS[2]) end
  redis.call('PUBLISH', ARGV[2], ARGV[3])
end
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[4]) then
  redis.call('PEXPIRE', KEYS[1], ARGV[4])
  redis.call('PEXPIRE', KEYS[3], ARGV[4])
end
local n = tonumber(redis.call('HGET', KEYS[1], 'n'))
local names = {}
for s = 0, n - 1 do names[#names + 1] = 'm' .. s end
if n == 0 then return {} end
return redis.call('HMGET', KEYS[1], unpack(names))
"""

# KEYS: instance hash, lease; ARGV: owner ("replica.id"), liveness key prefix, claim ('1'
# or '0'), then slots. Returns {gone, claimed, result per slot ('' = none)}. The lease is
# free when missing or when its replica is no longer live.
_CHECK = """
if redis.call('EXISTS', KEYS[1]) == 0 then return {1, 0} end
local out = {0, 0}
local flags = redis.call('HMGET', KEYS[1], 'done', 'failed')
if ARGV[3] == '1' and flags[1] ~= '1' and flags[2] ~= '1' then
  local held = redis.call('GET', KEYS[2])
  if held then
    local replica = string.match(held, '^[^.]*')
    if redis.call('EXISTS', ARGV[2] .. replica) == 0 then held = false end
  end
  if not held then
    local ttl = redis.call('PTTL', KEYS[1])
    if ttl > 0 then redis.call('SET', KEYS[2], ARGV[1], 'PX', ttl)
    else redis.call('SET', KEYS[2], ARGV[1]) end
    out[2] = 1
  end
end
if #ARGV > 3 then
  local names = {}
  for i = 4, #ARGV do names[#names + 1] = 'r' .. ARGV[i] end
  local found = redis.call('HMGET', KEYS[1], unpack(names))
  for i = 1, #found do out[#out + 1] = found[i] or '' end
end
return out
"""

# KEYS: lease; ARGV: owner, channel, message (the watches check at once)
_RESIGN = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', ARGV[2], ARGV[3])
  return 1
end
return 0
"""

# KEYS: instance hash, lease; ARGV: ttl_ms, channel, message, then the results in slot order
_PUBLISH = """
if redis.call('EXISTS', KEYS[1]) == 0 or redis.call('HGET', KEYS[1], 'done') == '1' then
  return 0
end
local n = tonumber(redis.call('HGET', KEYS[1], 'n'))
local drop, fields = {}, {'done', '1'}
for s = 0, n - 1 do drop[#drop + 1] = 'm' .. s end
for i = 4, #ARGV do
  fields[#fields + 1] = 'r' .. (i - 4)
  fields[#fields + 1] = ARGV[i]
end
if #drop > 0 then redis.call('HDEL', KEYS[1], unpack(drop)) end  -- scored: results only
redis.call('HSET', KEYS[1], unpack(fields))
redis.call('DEL', KEYS[2])
redis.call('PEXPIRE', KEYS[1], ARGV[1])
redis.call('PUBLISH', ARGV[2], ARGV[3])
return 1
"""

# KEYS: instance hash, lease; ARGV: channel, message, then the failed results in slot order
_FAIL = """
if redis.call('EXISTS', KEYS[1]) == 0 or redis.call('HGET', KEYS[1], 'done') == '1' then
  return 0
end
local fields = {'failed', '1'}
for i = 3, #ARGV do
  fields[#fields + 1] = 'r' .. (i - 3)
  fields[#fields + 1] = ARGV[i]
end
redis.call('HSET', KEYS[1], unpack(fields))
redis.call('DEL', KEYS[2])
redis.call('PUBLISH', ARGV[1], ARGV[2])
return 1
"""

# ARGV: liveness key, replica set, replica, lease_ms
_LIVE = """
redis.call('SET', ARGV[1], '1', 'PX', ARGV[4])
redis.call('SADD', ARGV[2], ARGV[3])
return 1
"""

# ARGV: P, this replica. Returns how many other replicas are live; forgets the lapsed ones.
_PEERS = """
local set, n = ARGV[1] .. 'replicas', 0
for _, r in ipairs(redis.call('SMEMBERS', set)) do
  if redis.call('EXISTS', ARGV[1] .. 'live:' .. r) == 0 then redis.call('SREM', set, r)
  elseif r ~= ARGV[2] then n = n + 1 end
end
return n
"""

LISTEN_RETRY_S: Final = 0.5
"""Pause before the signal listener reconnects after losing Redis."""


class RedisRendezvousStore(RendezvousStore):
    """Shared by every gateway replica (one Redis; the scripts derive the keys they touch,
    which a Redis Cluster would not allow). Commands share a bounded pool that queues callers
    when every connection is busy (never "too many connections"); signals arrive on one
    pub/sub connection of their own. Leases name this store's replica, kept live by one key
    renewed every `lease_s / 3` (`start`), so a leader costs no command while it waits."""

    def __init__(
        self,
        url: str,
        *,
        retention_s: float,
        prefix: str = "rubricate:rv:",
        timeout_s: float = 5.0,
        max_connections: int = 32,
    ) -> None:
        self._redis: CancellableRedis = redis_client(
            url, timeout_s=timeout_s, max_connections=max_connections, client="rendezvous"
        )
        self.retention_s = retention_s
        self.signals = Signals()
        self._prefix = prefix
        self._channel = prefix + "ev"
        self._join = self._redis.register_script(_JOIN)
        self._seal = self._redis.register_script(_SEAL)
        self._check = self._redis.register_script(_CHECK)
        self._resign = self._redis.register_script(_RESIGN)
        self._publish = self._redis.register_script(_PUBLISH)
        self._fail_script = self._redis.register_script(_FAIL)
        self._live = self._redis.register_script(_LIVE)
        self._peers = self._redis.register_script(_PEERS)
        self.replica = uuid.uuid4().hex[:16]
        self.leases_renewed_per_instance = False  # one liveness key per replica (`start`)
        self._live_prefix = prefix + "live:"
        self._liveness: asyncio.Task[None] | None = None
        self._starting = asyncio.Lock()
        self._listener: asyncio.Task[None] | None = None
        self._subscribed: asyncio.Future[None] | None = None
        self._closing = False
        self._lease_s = 30.0

    def _hash(self, group: str, instance: str) -> str:
        return f"{self._prefix}{group}:{instance}"

    # -- signals

    async def start(self, *, lease_s: float) -> None:
        self._lease_s = lease_s
        if self._liveness is None:
            # one liveness task per replica: the first requests of a step all call `start`
            # at once (before: each started a task of its own, and those `aclose` did not
            # cancel kept a stopped replica live after it had deleted its key)
            async with self._starting:
                if self._liveness is None:
                    await self._keep_live(lease_s)  # in force before it leads anything
                    self._liveness = asyncio.create_task(
                        self._stay_live(lease_s), name="rendezvous-liveness"
                    )
        if self._subscribed is None:
            self._subscribed = asyncio.get_running_loop().create_future()
            self._listener = asyncio.create_task(self._listen(), name="rendezvous-signals")
        if not self._subscribed.done():
            await asyncio.shield(self._subscribed)

    async def _listen(self) -> None:
        """Read the signal channel until closed; after a lost connection, resubscribe and wake
        every local waiter (signals may have been missed)."""
        assert self._subscribed is not None
        first = True
        while not self._closing:
            pubsub = self._redis.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.subscribe(self._channel)
                if not self._subscribed.done():
                    self._subscribed.set_result(None)
                if not first:  # back after an outage: this replica's leases first, then
                    with contextlib.suppress(RedisError, OSError):  # every local waiter
                        await self._keep_live(self._lease_s)  # re-checks (signals were lost)
                    self.reconnected_at = time.monotonic()
                    self.signals.fire_all()
                first = False
                while not self._closing:
                    message = await pubsub.get_message(timeout=1.0)
                    if message is not None and message.get("type") == "message":
                        self._on_signal(message.get("data"))
            except (RedisError, OSError) as exc:
                if not self._subscribed.done():
                    self._subscribed.set_exception(exc)
                    self._subscribed.exception()  # read by `start`, or nobody
                    self._subscribed = None
                    return
                log.warning("rendezvous.signals_lost error=%s", f"{type(exc).__name__}: {exc}")
                await asyncio.sleep(LISTEN_RETRY_S)
            finally:
                with contextlib.suppress(Exception):
                    await pubsub.aclose()  # type: ignore[no-untyped-call]

    async def _keep_live(self, lease_s: float) -> None:
        args: list[str | int] = [
            self._live_prefix + self.replica,
            self._prefix + "replicas",
            self.replica,
            _ms(lease_s),
        ]
        await self._live(keys=[], args=args)

    async def peers(self) -> int:
        return int(await self._peers(keys=[], args=[self._prefix, self.replica]))

    async def _stay_live(self, lease_s: float) -> None:
        """This replica's liveness, renewed every `lease_s / 3` until it closes."""
        while not self._closing:
            await asyncio.sleep(lease_s / 3)
            if self._closing:
                return
            try:
                await self._keep_live(lease_s)
            except (RedisError, OSError) as exc:
                log.warning("rendezvous.renew_failed replica=%s error=%s", self.replica, exc)

    def _on_signal(self, data: Any) -> None:
        text = data.decode() if isinstance(data, bytes) else str(data)
        group, _, instance = text.rpartition("|")
        if group:
            self.signals.fire(group, instance)

    # -- state

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
            self._prefix,
            group,
            instance,
            owner,
            expected,
            "1" if private else "0",
            _ms(lease_s),
            _ms(ttl_s),
            repr(time.time()),
            _ms(self.retention_s),
            len(entries),
            *(e.key for e in entries),
            *(e.payload for e in entries),
        ]
        inst, leader, *refs = await self._join(keys=[], args=args)
        return Joined(
            refs=[_ref(str(r)) for r in refs], instance=str(inst), leader=bool(int(leader))
        )

    async def seal(self, group: str, instance: str, *, ttl_s: float) -> list[str] | None:
        keys = [
            self._hash(group, instance),
            f"{self._prefix}{group}:open",
            self._hash(group, instance) + ":lease",
        ]
        args: list[str | int] = [instance, self._channel, f"{group}|{instance}", _ms(ttl_s)]
        payloads = await self._seal(keys=keys, args=args)
        return None if payloads is None else [str(p) for p in payloads]

    async def status(self, group: str, instance: str) -> Status | None:
        names = ["expected", "created", "sealed", "done", "private"]
        expected, created, sealed, done, private = await self._redis.hmget(
            self._hash(group, instance), names
        )
        if expected is None:
            return None
        return Status(
            expected=int(expected),
            created_at=float(str(created)),
            sealed=sealed == "1",
            done=done == "1",
            private=private == "1",
        )

    async def check(
        self,
        group: str,
        instance: str,
        slots: Sequence[int],
        *,
        owner: str,
        lease_s: float,
        claim: bool = True,
    ) -> Check:
        keys = [self._hash(group, instance), self._hash(group, instance) + ":lease"]
        args = [owner, self._live_prefix, "1" if claim else "0", *(str(s) for s in slots)]
        gone, claimed, *found = await self._check(keys=keys, args=args)
        results: list[str | None] = [str(r) if r else None for r in found]
        if len(results) < len(slots):
            results += [None] * (len(slots) - len(results))
        return Check(results=results, gone=bool(int(gone)), claimed=bool(int(claimed)))

    async def renew(
        self, group: str, instance: str, *, owner: str, lease_s: float, ttl_s: float
    ) -> bool:
        """Nothing to send: the lease holds while this replica is live (`start`), and the
        instance lives `ttl_s` from its sealing (`seal`)."""
        return True

    async def fail(self, group: str, instance: str, results: Sequence[str]) -> None:
        keys = [self._hash(group, instance), self._hash(group, instance) + ":lease"]
        await self._fail_script(keys=keys, args=[self._channel, f"{group}|{instance}", *results])

    async def resign(self, group: str, instance: str, *, owner: str) -> None:
        keys = [self._hash(group, instance) + ":lease"]
        await self._resign(keys=keys, args=[owner, self._channel, f"{group}|{instance}"])

    async def publish(
        self, group: str, instance: str, results: Sequence[str], *, ttl_s: float
    ) -> bool:
        keys = [self._hash(group, instance), self._hash(group, instance) + ":lease"]
        args: list[str | int] = [_ms(ttl_s), self._channel, f"{group}|{instance}", *results]
        return bool(int(await self._publish(keys=keys, args=args)))

    async def aclose(self) -> None:
        self._closing = True
        if self._liveness is not None:
            self._liveness.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._liveness
            with contextlib.suppress(RedisError, OSError):  # its leases free at once
                await self._redis.delete(self._live_prefix + self.replica)
                await self._redis.srem(self._prefix + "replicas", self.replica)
        if self._listener is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(asyncio.shield(self._listener), 3.0)
            self._listener.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._listener
        await self._redis.aclose()


def _ref(text: str) -> Ref:
    group, instance, slot = text.rsplit("|", 2)
    return Ref(group, instance, int(slot))


def _ms(seconds: float) -> int:
    return max(1, int(seconds * 1000))


# ---------------------------------------------------------------- the protocol


@dataclass
class _Watch:
    """The callers of this replica waiting on one instance."""

    slots: dict[int, list[asyncio.Future[str]]] = field(default_factory=dict)
    task: asyncio.Task[None] | None = None

    def waiting_slots(self) -> list[int]:
        """The slots a caller still waits on."""
        return [s for s, fs in self.slots.items() if any(not f.done() for f in fs)]


class Rendezvous:
    def __init__(
        self,
        store: RendezvousStore,
        *,
        retention_s: float,
        wait_s: float,
        lease_s: float = 30.0,
        outage_s: float | None = None,
    ) -> None:
        if retention_s <= 0 or wait_s <= 0 or lease_s <= 0:
            raise ValueError("retention_s, wait_s and lease_s must be positive")
        self.store = store
        self.retention_s = retention_s
        self.wait_s = wait_s
        self.lease_s = lease_s
        self.outage_s = 2 * lease_s if outage_s is None else outage_s
        """How long a join or a watch tries the store again through an outage before its
        callers get a `RendezvousError` (a leader holding an instance tries for the
        instance's lifetime: it alone can finish it without scoring again)."""
        self._claims_from = float("-inf")
        """No lease is claimed before this (`time.monotonic()`): after an outage, live
        replicas get a whole lease to renew the liveness that lapsed meanwhile."""
        self._tasks: set[asyncio.Task[Any]] = set()
        self._errors: dict[tuple[str, str], BaseException] = {}
        self._watches: dict[tuple[str, str], _Watch] = {}
        self._leading: set[tuple[str, str]] = set()
        self._gathering: dict[tuple[str, str], tuple[asyncio.Task[None], str]] = {}
        """This replica's leaders still gathering (not sealed): their task and lease owner."""
        self._scoring: set[asyncio.Task[None]] = set()
        """This replica's leaders that sealed their instance and score or publish it."""
        self.draining = False

    @property
    def busy(self) -> bool:
        """Whether this replica leads an instance (gathering or scoring it) or has a caller
        waiting on one."""
        return bool(self._leading or self._watches or self._scoring)

    async def alone(self) -> bool:
        """Whether no other live replica shares the store (one that cannot be asked, the
        store being unreachable, counts as none: nobody could take a group over then)."""
        try:
            return await self.store.peers() == 0
        except (RedisError, OSError) as exc:
            log.warning("rendezvous.peers_unknown error=%s", f"{type(exc).__name__}: {exc}")
            return True

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
        if self.draining:
            raise RendezvousDraining("this gateway replica is shutting down; retry")
        try:
            await self.store.start(lease_s=self.lease_s)
            refs = await self._join(
                group, entries, expected=expected, window_s=window_s, score=score
            )
            return await self._wait(refs, window_s=window_s, score=score)
        except (RedisError, OSError) as exc:  # the store is unreachable
            raise RendezvousError(f"{type(exc).__name__}: {exc}") from exc

    async def _store_call(self, op: str, call: Callable[[], Awaitable[T]], *, for_s: float) -> T:
        """`call()`, tried again through a store outage for up to `for_s` seconds after its
        first failure (then that failure is raised). Once it answers after failing, leases
        are not claimed for a whole lease: replicas renew what lapsed meanwhile."""
        pause, given_up_at = RETRY_FIRST_S, None
        while True:
            try:
                out = await call()
            except (RedisError, OSError) as exc:
                now = time.monotonic()
                # no lease is claimed through an outage, nor for a lease after it
                self._claims_from = max(self._claims_from, now + self.lease_s)
                if given_up_at is None:
                    given_up_at = now + for_s
                    log.warning(
                        "rendezvous.store_unreachable op=%s error=%s: trying again for %.0fs",
                        op,
                        f"{type(exc).__name__}: {exc}"[:200],
                        for_s,
                    )
                if now + pause > given_up_at:
                    raise
                await asyncio.sleep(pause)
                pause = min(2 * pause, RETRY_MAX_S)
                continue
            if given_up_at is not None:
                self._claims_from = max(self._claims_from, time.monotonic() + self.lease_s)
            return out

    def _hold_s(self) -> float:
        """How long the caller's own store calls try again through an outage: `outage_s`,
        and never past the caller's deadline (less a margin to answer in)."""
        left = time_left()
        return self.outage_s if left is None else min(self.outage_s, left - DEADLINE_MARGIN_S)

    def _may_claim(self) -> tuple[bool, float]:
        """Whether a watch may claim a lapsed lease now, else in how many seconds (a
        draining replica never does: it hands its groups over)."""
        start = max(self._claims_from, self.store.reconnected_at + self.lease_s)
        left = start - time.monotonic()
        return left <= 0 and not self.draining, max(left, 0.0)

    async def _join(
        self,
        group: str,
        entries: Sequence[Entry],
        *,
        expected: int | None,
        window_s: float,
        score: Scorer,
    ) -> list[Ref]:
        private = expected is None
        if expected is None:  # a group of its own, sealed as it opens
            group = f"{group}.{uuid.uuid4().hex[:16]}"
            expected = len(entries)
        refs: list[Ref] = []
        while len(refs) < len(entries):
            owner = f"{self.store.replica}.{uuid.uuid4().hex}"
            instance = uuid.uuid4().hex[:16]
            rest = entries[len(refs) :]

            def join(
                rest: Sequence[Entry] = rest, instance: str = instance, owner: str = owner
            ) -> Awaitable[Joined]:
                return self.store.join(
                    group,
                    instance=instance,
                    owner=owner,
                    entries=rest,
                    expected=expected,
                    private=private,
                    lease_s=self.lease_s,
                    ttl_s=window_s + self._ttl_s,
                )

            async def join_and_lead(
                join: Callable[[], Awaitable[Joined]] = join,
                instance: str = instance,
                owner: str = owner,
                hold_s: float = self._hold_s(),
            ) -> Joined:
                try:
                    joined = await self._store_call("join", join, for_s=hold_s)
                except (RedisError, OSError):
                    # the join may have run and its answer been lost: if it opened
                    # `instance`, its lease names `owner` and nobody leads it; give it up
                    # once the store answers, so that a watch takes it over
                    self._resign_later(group, instance, owner, for_s=window_s + self._ttl_s)
                    raise
                # a join tried again after its answer was lost finds its entries in the
                # instance it opened itself (ids are random): it leads that instance all the
                # same
                if joined.leader or any(ref.instance == instance for ref in joined.refs):
                    self._lead(group, instance, owner=owner, window_s=window_s, score=score)
                return joined

            # the join and the start of its lead run to their end even when the caller is
            # cancelled meanwhile (its deadline, a closed connection): an instance opened in
            # the store is always led, since its lease names an owner of this live replica
            # and no other watch would take it over
            joined = await asyncio.shield(detached(join_and_lead(), self._tasks))
            if not joined.refs:
                raise RendezvousError(f"group {group[:16]} took none of {len(entries)} entries")
            refs.extend(joined.refs)
        return refs

    def _resign_later(self, group: str, instance: str, owner: str, *, for_s: float) -> None:
        """Give up `owner`'s lease as soon as the store answers (trying for `for_s`, the
        instance's lifetime): a lease whose leader stopped must not wait for its keys to
        expire."""

        async def resign() -> None:
            try:
                await self._store_call(
                    "resign",
                    lambda: self.store.resign(group, instance, owner=owner),
                    for_s=for_s,
                )
            except (RedisError, OSError) as exc:
                log.warning(
                    "rendezvous.resign_failed instance=%s error=%s", instance, type(exc).__name__
                )

        task = asyncio.create_task(resign(), name=f"rendezvous-resign-{instance}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _wait(self, refs: Sequence[Ref], *, window_s: float, score: Scorer) -> list[str]:
        futures = [self._watch(ref, window_s=window_s, score=score) for ref in refs]
        GROUP_WAITERS.inc()
        try:
            async with asyncio.timeout(window_s + self.wait_s):
                await asyncio.wait(futures)
            failed = [f.exception() for f in futures if f.exception() is not None]
            if failed:
                raise failed[0]  # type: ignore[misc]
            texts = [f.result() for f in futures]
        except TimeoutError:
            raise RendezvousError(
                f"the group was not scored within {window_s + self.wait_s:.0f}s"
            ) from None
        finally:
            GROUP_WAITERS.dec()
            for future in futures:
                if not future.done():
                    future.cancel()
        return [self._unwrap(ref, text) for ref, text in zip(refs, texts, strict=True)]

    def _unwrap(self, ref: Ref, text: str) -> str:
        if text.startswith(_FAILED):
            error = self._errors.get((ref.group, ref.instance))
            if error is not None:
                raise error
            raise RendezvousFailed(text[len(_FAILED) :])
        return text.partition(":")[2]

    def _watch(self, ref: Ref, *, window_s: float, score: Scorer) -> "asyncio.Future[str]":
        """A future for the slot's stored result, served by the instance's one watch."""
        key = (ref.group, ref.instance)
        watch = self._watches.get(key)
        if watch is None:
            watch = self._watches[key] = _Watch()
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        watch.slots.setdefault(ref.slot, []).append(future)
        if watch.task is None or watch.task.done():
            watch.task = asyncio.create_task(
                self._follow(ref.group, ref.instance, watch, window_s=window_s, score=score),
                name=f"rendezvous-watch-{ref.instance}",
            )
        return future

    async def _follow(
        self, group: str, instance: str, watch: _Watch, *, window_s: float, score: Scorer
    ) -> None:
        """Serve the watch's callers: read their results when the instance is signalled, and
        check the leader's lease once per lease period (one takeover, by whoever claims)."""
        key = (group, instance)
        try:
            while watch.waiting_slots():
                seen = self.store.signals.count(group, instance)
                # this replica's own leader hands its callers the results; any other instance
                # is checked now (a slot may be scored already), then at each signal or
                # lease period
                within_s = self.lease_s
                if key not in self._leading:
                    slots = watch.waiting_slots()
                    owner = f"{self.store.replica}.{uuid.uuid4().hex}"

                    def check(slots: list[int] = slots, owner: str = owner) -> Awaitable[Check]:
                        # whether to claim is decided at each try: a try that follows an
                        # outage must not claim (live replicas have not renewed yet)
                        return self.store.check(
                            group,
                            instance,
                            slots,
                            owner=owner,
                            lease_s=self.lease_s,
                            claim=self._may_claim()[0],
                        )

                    found = await self._store_call("check", check, for_s=self.outage_s)
                    may_claim, claim_in = self._may_claim()
                    if not may_claim and not self.draining:  # after an outage: check again
                        # once claims resume
                        within_s = min(within_s, claim_in + 0.05)
                    if found.claimed:
                        log.warning("rendezvous.takeover group=%.16s instance=%s", group, instance)
                        self._lead(group, instance, owner=owner, window_s=window_s, score=score)
                    for slot, result in zip(slots, found.results, strict=True):
                        if result is not None:
                            self._deliver(watch, slot, result)
                    if found.gone:
                        self._fail(watch, RendezvousError("the group expired before it was scored"))
                        return
                    if not watch.waiting_slots():
                        return
                await self.store.signals.wait(group, instance, seen=seen, within_s=within_s)
        except Exception as exc:  # the store failed: every caller of the watch hears it
            self._fail(watch, RendezvousError(f"{type(exc).__name__}: {exc}"))
        finally:
            if self._watches.get(key) is watch and not watch.waiting_slots():
                del self._watches[key]

    @staticmethod
    def _deliver(watch: _Watch, slot: int, result: str) -> None:
        for future in watch.slots.pop(slot, []):
            if not future.done():
                future.set_result(result)

    @staticmethod
    def _fail(watch: _Watch, error: Exception) -> None:
        for futures in watch.slots.values():
            for future in futures:
                if not future.done():
                    future.set_exception(error)
        watch.slots.clear()

    def _lead(
        self, group: str, instance: str, *, owner: str, window_s: float, score: Scorer
    ) -> None:
        """Run the instance in a task of its own (a closed connection does not cancel it),
        without the leading request's deadline: the group is scored for every member, and a
        member's deadline bounds only its own wait."""
        self._leading.add((group, instance))
        with deadline_scope(None, replace=True):  # the task copies this context
            task = asyncio.create_task(
                self._run(group, instance, owner=owner, window_s=window_s, score=score),
                name=f"rendezvous-{instance}",
            )
        self._gathering[(group, instance)] = (task, owner)
        task.add_done_callback(lambda _: self._gathering.pop((group, instance), None))
        task.add_done_callback(self._scoring.discard)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(
        self, group: str, instance: str, *, owner: str, window_s: float, score: Scorer
    ) -> None:
        key = (group, instance)
        heartbeat = (
            asyncio.create_task(self._heartbeat(group, instance, owner))
            if self.store.leases_renewed_per_instance
            else None
        )

        # the leader alone can finish its instance without scoring it again: through a store
        # outage it tries each store call again for the instance's lifetime
        def persist(op: str, call: Callable[[], Awaitable[T]]) -> Awaitable[T]:
            return self._store_call(op, call, for_s=self._ttl_s)

        def read() -> Awaitable[Status | None]:
            return self.store.status(group, instance)

        try:
            seen = self.store.signals.count(group, instance)  # before the read: a signal
            status = await persist("status", read)  # during it is not lost
            # a private instance is whole after its one join (entries that attached to an
            # earlier slot left it smaller than the call): sealed at once
            while status is not None and not (status.done or status.sealed or status.private):
                left = status.created_at + window_s - time.time()
                if left <= 0:
                    break
                signalled = await self.store.signals.wait(group, instance, seen=seen, within_s=left)
                if signalled > seen:  # sealed (or done) elsewhere: read it; else the window
                    seen = signalled  # is over and sealing tells what is left
                    status = await persist("status", read)
            if status is None or status.done:
                return
            # from here on the instance is this replica's to finish, even while it drains
            self._gathering.pop(key, None)
            self._scoring.add(asyncio.current_task())  # type: ignore[arg-type]
            payloads = await persist(
                "seal", lambda: self.store.seal(group, instance, ttl_s=self._ttl_s)
            )
            if payloads is None:
                return
            batch = Batch(
                payloads=payloads,
                expected=len(payloads) if status.private else status.expected,
                private=status.private,
            )
            results, ttl_s = await self._score(group, instance, batch, score)
            if results and results[0].startswith(_FAILED):  # kept for a retry to score again
                await persist("fail", lambda: self.store.fail(group, instance, results))
                published = True
            else:
                published = await persist(
                    "publish", lambda: self.store.publish(group, instance, results, ttl_s=ttl_s)
                )
            watch = self._watches.get(key)
            if published and watch is not None:  # this replica's callers need no signal
                for slot in list(watch.slots):
                    if slot < len(results):
                        self._deliver(watch, slot, results[slot])
        except Exception as exc:  # the store stayed down: the lease is given up as soon as
            log.warning(  # it answers, and a waiter takes over
                "rendezvous.lead_failed group=%.16s instance=%s error=%s",
                group,
                instance,
                f"{type(exc).__name__}: {exc}"[:300],
            )
            self._resign_later(group, instance, owner, for_s=window_s + self._ttl_s)
        finally:
            self._leading.discard(key)
            if heartbeat is not None:
                heartbeat.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await heartbeat
            self.store.signals.fire(group, instance)  # the watch re-checks (and may take over)

    async def _score(
        self, group: str, instance: str, batch: Batch, score: Scorer
    ) -> tuple[list[str], float]:
        """The stored results (kept, once or failed) and how long they live."""
        try:
            scored = await score(batch)
            if len(scored) != len(batch.payloads):
                raise RuntimeError(f"{len(scored)} results for {len(batch.payloads)} entries")
            return [(_OK if r.keep else _ONCE) + r.text for r in scored], self.retention_s
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
            failed = _FAILED + f"{type(exc).__name__}: {exc}"[:500]
            return [failed] * len(batch.payloads), FAILURE_TTL_S

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

    async def drain(self, *, grace_s: float) -> None:
        """Shut this replica down without losing or repeating a sample (a rolling upgrade,
        SIGTERM): no new join; the instances it leads that still gather are handed over (their
        leaders stop and resign: another replica's watch takes them over at once, with the
        entries stored); the callers waiting on anything but an instance this replica scores
        get `RendezvousDraining` at once (their retry, on another replica, waits on the slots
        they hold); the instances it scores are finished and answered, for up to `grace_s`.
        The gateway calls it after its hold (`rubricate.gateway.drain`): on the only live
        replica, once it is idle, so that nothing is left to hand over unless the hold ran
        out."""
        self.draining = True
        handed = list(self._gathering.items())
        for _, (task, _owner) in handed:
            task.cancel()
        for (group, instance), (task, owner) in handed:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
            try:
                await self.store.resign(group, instance, owner=owner)
            except (RedisError, OSError):
                self._resign_later(group, instance, owner, for_s=grace_s)
            log.info("rendezvous.handed_over group=%.16s instance=%s", group, instance)
        scored_here = {
            key for key in self._leading if key not in dict(handed) and key in self._watches
        }
        for key, watch in list(self._watches.items()):
            if key not in scored_here:
                self._fail(watch, RendezvousDraining("this gateway replica is shutting down"))
                if watch.task is not None:
                    watch.task.cancel()
        if self._scoring:
            await asyncio.wait(list(self._scoring), timeout=grace_s)

    async def aclose(self) -> None:
        for watch in list(self._watches.values()):
            if watch.task is not None:
                watch.task.cancel()
        for task in [*self._tasks, *(w.task for w in self._watches.values() if w.task)]:
            task.cancel()
        for task in [*self._tasks, *(w.task for w in self._watches.values() if w.task)]:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await self.store.aclose()
