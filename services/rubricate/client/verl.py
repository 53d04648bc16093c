"""veRL custom reward function. In the trainer's config:

    custom_reward_function:
      path: <site-packages>/rubricate/client/verl.py   # or a file that imports it
      name: compute_score                               # compute_score_batch with the batch manager
      reward_kwargs: {url: "http://gateway:8000", kind: stagewise}

veRL gives no prompt to `compute_score`: the question comes from the label (`ground_truth`
as JSON with `question`) or `extra_info["question"]`. Returns `{"score": R, "scored": 1.0,
"fallback": 0.0, ...}`; where the platform could not score, score 0.0 with `scored` 0.0.
"""

from collections.abc import Sequence
from typing import Any

from rubricate.client.trainers import (
    AdapterSettings,
    async_client,
    merge_label,
    per_sample,
    reward_request,
    sync_client,
)


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: dict[str, Any] | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    settings = AdapterSettings.from_env(**kwargs)
    request = reward_request(
        responses=[solution_str],
        prompts=None,
        labels=[merge_label(ground_truth, extra_info)],
        kind=settings.kind,
    )
    return per_sample(sync_client(settings).get_reward(request), 0)


async def compute_score_async(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: dict[str, Any] | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    settings = AdapterSettings.from_env(**kwargs)
    request = reward_request(
        responses=[solution_str],
        prompts=None,
        labels=[merge_label(ground_truth, extra_info)],
        kind=settings.kind,
    )
    return per_sample(await async_client(settings).get_reward(request), 0)


def compute_score_batch(
    data_sources: Sequence[str],
    solution_strs: Sequence[str],
    ground_truths: Sequence[Any],
    extra_infos: Sequence[dict[str, Any] | None] | None = None,
    **kwargs: Any,
) -> list[dict[str, Any]]:
    """For veRL's batch reward manager: one request for the whole batch, so the samples of
    one question are scored as one group (one rubric-generation call per question)."""
    settings = AdapterSettings.from_env(**kwargs)
    infos = list(extra_infos) if extra_infos is not None else [None] * len(solution_strs)
    request = reward_request(
        responses=list(solution_strs),
        prompts=None,
        labels=[merge_label(g, e) for g, e in zip(ground_truths, infos, strict=True)],
        kind=settings.kind,
    )
    response = sync_client(settings).get_reward(request)
    return [per_sample(response, i) for i in range(len(solution_strs))]
