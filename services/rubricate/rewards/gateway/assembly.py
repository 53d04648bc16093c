"""Group assembly for `/get_reward`: the stagewise samples of one rollout group that arrive in
separate requests (OpenRLHF posts one sample per request; TRL on several ranks, veRL's
per-sample reward loop) are gathered and scored once, as one group, and each request gets its
own samples' results. See docs/gateway.md, "Group assembly".

A group is (tenant, question id or the hash of the normalized question, training step, group
key). Its expected size is the label's `group_size`, else `RUBRICATE_GATEWAY_GROUP_SIZE`;
without either (or with 1) a request's samples of a question are the whole group, as before.
Every sample also has a content key (tenant, kind, prompt, query, label): a sample sent again
is answered from its group's result (`rubricate.common.rendezvous`) with no judge call.
"""

import asyncio
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rubricate.common.errors import ServiceError
from rubricate.common.rendezvous import (
    Entry,
    MemoryRendezvousStore,
    RedisRendezvousStore,
    Rendezvous,
    RendezvousDraining,
    RendezvousError,
    Scorer,
)
from rubricate.core.normalize import question_hash


@dataclass(frozen=True)
class GroupMember:
    group: str
    """`group_id(...)` of the sample's group."""
    key: str
    """`content_key(...)` of the sample."""
    payload: str
    """What the group's scorer needs of the sample (JSON)."""
    expected: int | None
    """The group's expected size; None or 1: this request's samples are the whole group."""


def group_id(
    *,
    tenant: str,
    question: str,
    question_id: str | None,
    step: int | None,
    group_key: str | None,
) -> str:
    question_part = f"id:{question_id}" if question_id else f"q:{question_hash(question)}"
    parts = [tenant, question_part, "" if step is None else str(step), group_key or ""]
    return _digest(parts)


def content_key(
    *, tenant: str, kind: str, prompt: str, query: str, label: Mapping[str, Any]
) -> str:
    canonical = json.dumps(label, sort_keys=True, separators=(",", ":"), default=str)
    return _digest([tenant, kind, prompt, query, canonical])


def _digest(parts: Sequence[str]) -> str:
    h = hashlib.sha256()
    for part in parts:
        data = part.encode("utf-8")
        h.update(len(data).to_bytes(8, "big"))
        h.update(data)
    return h.hexdigest()


class GroupAssembler:
    def __init__(self, rendezvous: Rendezvous, *, gather_s: float) -> None:
        self.rendezvous = rendezvous
        self.gather_s = gather_s

    async def assemble(self, members: Sequence[GroupMember], *, score: Scorer) -> list[str]:
        """Each member's result (the scorer's text), in order; the groups of the request are
        joined concurrently, so requests that each hold part of several groups never wait on
        each other."""
        by_group: dict[str, list[int]] = {}
        for pos, member in enumerate(members):
            by_group.setdefault(member.group, []).append(pos)
        out: list[str] = [""] * len(members)

        async def one(positions: list[int]) -> None:
            first = members[positions[0]]
            expected = first.expected if first.expected and first.expected > 1 else None
            results = await self.rendezvous.gather(
                first.group,
                [Entry(key=members[p].key, payload=members[p].payload) for p in positions],
                expected=expected,
                window_s=self.gather_s,
                score=score,
            )
            for pos, result in zip(positions, results, strict=True):
                out[pos] = result

        try:
            await asyncio.gather(*(one(p) for p in by_group.values()))
        except RendezvousError as exc:
            # a draining replica's samples keep their slots: retried at once, on another
            # replica, they wait there for the same group
            retry_after = "1" if isinstance(exc, RendezvousDraining) else "5"
            raise ServiceError(
                503,
                f"group assembly failed: {exc}",
                type="group_assembly_unavailable",
                headers={"Retry-After": retry_after},
            ) from exc
        return out

    async def drain(self, *, grace_s: float) -> None:
        """Shutting down: hand over the groups still gathering, answer the rest (see
        `Rendezvous.drain`)."""
        await self.rendezvous.drain(grace_s=grace_s)

    async def aclose(self) -> None:
        await self.rendezvous.aclose()


def build_assembler(
    *,
    redis_url: str | None,
    gather_s: float,
    retention_s: float,
    wait_s: float,
    lease_s: float,
) -> GroupAssembler:
    """Redis when the gateway has one (replicas share the groups), else process memory."""
    store = (
        RedisRendezvousStore(redis_url, retention_s=retention_s)
        if redis_url
        else MemoryRendezvousStore(retention_s=retention_s)
    )
    rendezvous = Rendezvous(store, retention_s=retention_s, wait_s=wait_s, lease_s=lease_s)
    return GroupAssembler(rendezvous, gather_s=gather_s)
