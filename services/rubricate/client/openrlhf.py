"""OpenRLHF. The usual way needs no code: point the trainer at the gateway,

    --reward.remote_url http://gateway:8000/get_reward   (older releases: --remote_rm_url)
    --label_key label                                     (labels as JSON: question, rubrics, ...)

For OpenRLHF's local reward-function mode (`--remote_rm_url /path/reward_func.py`), that file
can be `from rubricate.client.openrlhf import reward_func`: it forwards the batch to the gateway
and returns OpenRLHF's dict (torch tensors when torch is installed).
"""

from collections.abc import Sequence
from typing import Any

from rubricate.client.trainers import AdapterSettings, sync_client
from rubricate.gateway.trainer_schemas import GetRewardRequest


def reward_func(
    queries: Sequence[str], prompts: Sequence[str], labels: Sequence[Any] | None = None, **_: Any
) -> dict[str, Any]:
    settings = AdapterSettings.from_env()
    request = GetRewardRequest.model_validate(
        {
            "query": list(queries),
            "prompts": list(prompts),
            "labels": list(labels) if labels is not None else None,
            "kind": settings.kind,
        }
    )
    response = sync_client(settings).get_reward(request)
    out: dict[str, Any] = response.model_dump()
    try:
        import torch
    except ImportError:
        return out
    return {
        "rewards": torch.tensor(response.rewards),
        "scores": torch.tensor(response.scores),
        "extra_logs": {k: torch.tensor(v) for k, v in response.extra_logs.items()},
    }
