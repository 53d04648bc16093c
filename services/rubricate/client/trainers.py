"""What the trainer adapters share: settings from the environment, one pooled client per
setting (per event loop for async), and the `/get_reward` request for a batch of samples."""

import asyncio
import json
import os
import threading
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rubricate.client.http import DEFAULT_URL, AsyncClient, Client
from rubricate.gateway.trainer_schemas import GetRewardRequest, GetRewardResponse, RewardLabel

LABEL_KEYS = tuple(RewardLabel.model_fields)
"""Label fields a dataset row or `extra_info` may carry next to (or instead of) a label."""
SCORED = "rubricate/scored"


@dataclass(frozen=True)
class AdapterSettings:
    url: str = DEFAULT_URL
    kind: str | None = None
    tenant: str | None = None
    timeout_s: float = 900.0
    api_key: str | None = field(default=None, repr=False)

    @classmethod
    def from_env(cls, **overrides: Any) -> "AdapterSettings":
        """RUBRICATE_URL, RUBRICATE_REWARD_KIND, RUBRICATE_TENANT, RUBRICATE_TIMEOUT_S,
        RUBRICATE_API_KEY; explicit keyword arguments (e.g. veRL's `reward_kwargs`) win."""
        values: dict[str, Any] = {
            "url": os.environ.get("RUBRICATE_URL", DEFAULT_URL),
            "kind": os.environ.get("RUBRICATE_REWARD_KIND") or None,
            "tenant": os.environ.get("RUBRICATE_TENANT") or None,
            "timeout_s": float(os.environ.get("RUBRICATE_TIMEOUT_S", "900")),
            "api_key": os.environ.get("RUBRICATE_API_KEY") or None,
        }
        values.update({k: v for k, v in overrides.items() if k in values and v is not None})
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


def per_sample(response: GetRewardResponse, index: int) -> dict[str, Any]:
    """A flat dict for one sample: `score` plus every extra log without its prefix."""
    out: dict[str, Any] = {"score": response.rewards[index]}
    for key, values in response.extra_logs.items():
        out[key.removeprefix("rubricate/")] = values[index]
    return out
