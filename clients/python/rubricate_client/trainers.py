"""What the trainer adapters share: settings from the environment, one pooled client per
setting (per event loop for async), the `/get_reward` request for a batch of samples, the
group fields that let the gateway gather a group sent in pieces, and one flat dict per sample
with the same keys for every sample."""

import asyncio
import hashlib
import json
import os
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rubricate_client.errors import APIError, TransportError
from rubricate_client.http import DEFAULT_URL, AsyncClient, Client
from rubricate_client.retry import TRAINER_RETRY
from rubricate_client.schemas.rewards import GetRewardRequest, GetRewardResponse, RewardLabel

GROUP_KEYS = ("group_size", "group_key", "step")
"""Label fields that tell the gateway which group a sample belongs to: samples of one group
sent in separate `/get_reward` requests (one per sample, or split across trainer processes)
are gathered by the gateway and scored once as one group."""
LABEL_KEYS = tuple(dict.fromkeys((*RewardLabel.model_fields, *GROUP_KEYS)))
"""Label fields a dataset row or `extra_info` may carry next to (or instead of) a label."""
SCORED = "rubricate/scored"
SAMPLE_LOGS = (
    "scored",
    "fallback",
    "R_plan",
    "R_research",
    "R_review",
    "R_answer",
    "steps",
    "partial_group",
    "group_size",
)
"""The per-sample diagnostics every adapter hands its trainer, the same keys for every sample
whatever its reward kind (0.0 where a kind has no such value): veRL builds its arrays from the
first sample's keys. `partial_group` is 1.0 where the gateway scored the sample's group before
all of it arrived, `group_size` the number of samples the group was scored with."""


@dataclass(frozen=True)
class AdapterSettings:
    url: str = DEFAULT_URL
    kind: str | None = None
    tenant: str | None = None
    timeout_s: float = 900.0
    api_key: str | None = field(default=None, repr=False)
    group_size: int | None = None
    """Samples per group (the trainer's samples per prompt), sent as the label's `group_size`
    so the gateway waits for the whole group; None: the gateway's setting."""
    unscored_score: float | None = None
    """For trainers that need a number for every sample (veRL, OpenRLHF's tensors): the
    reward to give a sample the platform could not score, chosen explicitly. None (the
    default): such a sample raises `UnscoredSampleError` instead of becoming a silent 0."""

    @classmethod
    def from_env(cls, **overrides: Any) -> "AdapterSettings":
        """RUBRICATE_URL, RUBRICATE_REWARD_KIND, RUBRICATE_TENANT, RUBRICATE_TIMEOUT_S,
        RUBRICATE_API_KEY, RUBRICATE_GROUP_SIZE, RUBRICATE_UNSCORED_SCORE; explicit keyword
        arguments (e.g. veRL's `reward_kwargs`) win."""
        unscored = os.environ.get("RUBRICATE_UNSCORED_SCORE") or None
        group_size = os.environ.get("RUBRICATE_GROUP_SIZE") or None
        values: dict[str, Any] = {
            "url": os.environ.get("RUBRICATE_URL", DEFAULT_URL),
            "kind": os.environ.get("RUBRICATE_REWARD_KIND") or None,
            "tenant": os.environ.get("RUBRICATE_TENANT") or None,
            "timeout_s": float(os.environ.get("RUBRICATE_TIMEOUT_S", "900")),
            "api_key": os.environ.get("RUBRICATE_API_KEY") or None,
            "group_size": None if group_size is None else int(group_size),
            "unscored_score": None if unscored is None else float(unscored),
        }
        values.update({k: v for k, v in overrides.items() if k in values and v is not None})
        if values["unscored_score"] is not None:
            values["unscored_score"] = float(values["unscored_score"])
        if values["group_size"] is not None:
            values["group_size"] = int(values["group_size"])
        return cls(**values)


_lock = threading.Lock()
_sync_clients: dict[AdapterSettings, Client] = {}
_LoopClients = dict[AdapterSettings, AsyncClient]
_async_clients: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopClients]" = (
    weakref.WeakKeyDictionary()
)


def sync_client(settings: AdapterSettings) -> Client:
    with _lock:
        client = _sync_clients.get(settings)
        if client is None:
            client = Client(
                settings.url,
                timeout_s=settings.timeout_s,
                tenant=settings.tenant,
                api_key=settings.api_key,
                retry=TRAINER_RETRY,
            )
            _sync_clients[settings] = client
        return client


def async_client(settings: AdapterSettings) -> AsyncClient:
    loop = asyncio.get_running_loop()
    per_loop = _async_clients.setdefault(loop, {})
    client = per_loop.get(settings)
    if client is None:
        client = AsyncClient(
            settings.url,
            timeout_s=settings.timeout_s,
            tenant=settings.tenant,
            api_key=settings.api_key,
            retry=TRAINER_RETRY,
        )
        per_loop[settings] = client
    return client


def merge_label(label: Any, extra: Mapping[str, Any] | None = None) -> dict[str, Any] | str | None:
    """A sample's label: the dataset label (JSON text, an object, or plain text) with any
    label fields from `extra` (question, question_id, rubrics, nuggets, kind, step) added."""
    fields = {k: extra[k] for k in LABEL_KEYS if extra and extra.get(k) is not None}
    if isinstance(label, str):
        try:
            decoded = json.loads(label)
        except ValueError:
            decoded = None
        label = (
            decoded if isinstance(decoded, dict) else ({"reference": label} if fields else label)
        )
    if label is None:
        return fields or None
    if isinstance(label, Mapping):
        return {**dict(label), **fields}
    return {"reference": str(label), **fields} if fields else str(label)


def group_key_of(*parts: Any) -> str:
    """A stable group key from what the samples of one group share (e.g. the prompt text):
    every process computes the same key for the same prompt."""
    digest = hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode())
    return digest.hexdigest()[:32]


def with_group(
    label: Any,
    *,
    group_size: int | None,
    group_key: str | None,
    step: int | None,
) -> dict[str, Any]:
    """The label (as `merge_label` gives it) with the group fields added; a value the label
    already carries (the dataset's own `group_key`, say) wins."""
    if label is None:
        out: dict[str, Any] = {}
    elif isinstance(label, Mapping):
        out = dict(label)
    else:
        out = {"reference": str(label)}
    for key, value in (("group_size", group_size), ("group_key", group_key), ("step", step)):
        if value is not None and out.get(key) is None:
            out[key] = value
    return out


def reward_request(
    *,
    responses: Sequence[str],
    prompts: Sequence[str] | None,
    labels: Sequence[Any],
    kind: str | None,
) -> GetRewardRequest:
    prompts = list(prompts) if prompts is not None else [""] * len(responses)
    return GetRewardRequest.model_validate(
        {
            "query": [p + r for p, r in zip(prompts, responses, strict=True)],
            "prompts": prompts,
            "labels": list(labels),
            "kind": kind,
        }
    )


def scored(response: GetRewardResponse) -> list[bool]:
    flags = response.extra_logs.get(SCORED)
    return [True] * len(response.rewards) if flags is None else [f > 0.5 for f in flags]


class UnscoredSampleError(RuntimeError):
    """The platform could not score a sample (its reward is null, `rubricate/scored` 0) and
    the trainer needs a number for it. Nothing is made up: fix the judge, or choose the value
    explicitly with `unscored_score` (reward_kwargs, or RUBRICATE_UNSCORED_SCORE)."""

    def __init__(self, indices: Sequence[int], *, trainer: str) -> None:
        self.indices = list(indices)
        super().__init__(
            f"rubricate could not score sample(s) {self.indices} (the judge failed; the "
            f"gateway answered a null reward with rubricate/scored = 0) and {trainer} needs a "
            "number for every sample. Fix the judge, or set unscored_score (reward_kwargs or "
            "RUBRICATE_UNSCORED_SCORE) to the reward such a sample should get."
        )


def numeric_rewards(
    response: GetRewardResponse, settings: AdapterSettings, *, trainer: str
) -> list[float]:
    """The rewards as numbers for a trainer that cannot take a null: an unscored sample
    raises `UnscoredSampleError` unless `settings.unscored_score` was chosen explicitly."""
    missing = [i for i, r in enumerate(response.rewards) if r is None]
    if missing and settings.unscored_score is None:
        raise UnscoredSampleError(missing, trainer=trainer)
    fill = settings.unscored_score or 0.0
    return [fill if r is None else r for r in response.rewards]


def per_sample(
    response: GetRewardResponse,
    index: int,
    *,
    settings: AdapterSettings | None = None,
    trainer: str = "the trainer",
) -> dict[str, Any]:
    """A flat dict for one sample: `score` plus the `SAMPLE_LOGS` (the same keys for every
    sample, 0.0 where the gateway sent no such log). `score` is a number: an unscored sample
    raises `UnscoredSampleError` unless `unscored_score` is set (then `scored` is 0.0 next
    to it, so the trainer can still see and filter it)."""
    reward = response.rewards[index]
    if reward is None:
        if settings is None or settings.unscored_score is None:
            raise UnscoredSampleError([index], trainer=trainer)
        reward = settings.unscored_score
    out: dict[str, Any] = {"score": reward}
    for key in SAMPLE_LOGS:
        values = response.extra_logs.get(f"rubricate/{key}")
        out[key] = float(values[index]) if values is not None else 0.0
    if SCORED not in response.extra_logs:
        out["scored"] = 0.0 if response.rewards[index] is None else 1.0
    return out


async def get_reward_or_fail(
    url: str,
    request: GetRewardRequest,
    *,
    timeout_s: float,
    tenant: str | None,
    failure: Callable[[str], Exception],
) -> GetRewardResponse:
    """One `/get_reward` on a client of its own (the key from `RUBRICATE_API_KEY`); a
    gateway error or an unreachable gateway raises `failure(message)`, the environment
    library's own failure type (NeMo Gym's `JudgeError`, the verifiers judge's error), so
    it reaches the trainer as a failure, never as a reward."""
    async with AsyncClient(
        url, timeout_s=timeout_s, tenant=tenant, api_key=os.environ.get("RUBRICATE_API_KEY") or None
    ) as client:
        try:
            return await client.get_reward(request)
        except (APIError, TransportError) as exc:
            raise failure(f"rubricate gateway: {exc}") from exc
