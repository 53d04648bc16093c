"""veRL 0.9.1 reward functions. veRL's reward loop calls a reward function once per sample
(`RewardManagerBase.run_single`, in the sync and the streamed agent-loop path); the batch
reward manager of older releases is gone. In the trainer's config:

    reward:
      custom_reward_function:
        path: <site-packages>/rubricate_client/verl.py
        name: compute_score                  # or compute_score_async
        reward_kwargs: {url: "http://gateway:8000", kind: stagewise, group_size: 8}

Each call sends one sample with its group fields (`group_size` = `actor_rollout_ref.rollout.n`,
`group_key`, `step`), and the gateway gathers the samples of one group and scores them once
as one group. veRL gives `compute_score` no prompt and no group id: the question comes from
the label (`ground_truth` as JSON with `question`) or `extra_info["question"]`, and the group
key from `extra_info` (`group_key`, else `uid`, else `index`) or, without one, the gateway's
default (the question). The reward manager in `rubricate_client.verl_manager` has both the
prompt and veRL's group id, and puts each stage's reward on the stage's tokens.

Returns `{"score": R, "scored", "fallback", "R_plan", ..., "steps"}`, the same keys for every
sample whatever its kind. veRL needs a float for every sample, so where the platform could not
score one (the gateway's reward is null) this raises `UnscoredSampleError` rather than handing
veRL a made-up 0.0; `reward_kwargs: {unscored_score: <float>}` (or RUBRICATE_UNSCORED_SCORE)
chooses the value explicitly, with `scored` 0.0 next to it.
"""

from collections.abc import Mapping, Sequence
from typing import Any

from rubricate_client.schemas.rewards import GetRewardRequest
from rubricate_client.trainers import (
    AdapterSettings,
    UnscoredSampleError,
    async_client,
    merge_label,
    per_sample,
    reward_request,
    sync_client,
    with_group,
)

TRAINER = "veRL"
GDPO_REWARD_KEYS = ("R_plan", "R_research", "R_review", "R_answer")
"""The stage components in each sample's dict, for veRL's decoupled normalization:
`reward.reward_manager.name: gdpo`, `algorithm.adv_estimator: gdpo`,
`algorithm.gdpo_reward_keys: [R_plan, R_research, R_review, R_answer]` and
`algorithm.gdpo_reward_weights` = `rubricate_client.stagecredit.component_weights()` (Λ's
column sums: 1.0, 1.4, 2.0, 3.4). veRL reads them as float32 arrays and normalizes each within
its group with plain (not NaN-aware) statistics, so each is a number: the stage's score where
the stage was judged; for a sample scored on its answer only (`fallback` 1.0), R_answer on
every stage (the platform's own broadcast for that sample); for a stage with no rubric in the
group, 0.0 for every sample of the group, which the group normalization turns into 0 (the
stage drops out, it is not a reward). An unscored sample raises `UnscoredSampleError` as for
the scalar. The null-preserving components are on `/get_reward` (`components`)."""
GROUP_ID_KEYS = ("group_key", "uid", "index")
"""Where `extra_info` may carry the group's id (veRL's `uid`, the dataset's `index`)."""


def sample_label(
    ground_truth: Any, extra_info: Mapping[str, Any] | None, settings: AdapterSettings
) -> dict[str, Any]:
    extra = extra_info or {}
    key = next((extra[k] for k in GROUP_ID_KEYS if extra.get(k) is not None), None)
    step = extra.get("step", extra.get("global_step"))
    return with_group(
        merge_label(ground_truth, extra),
        group_size=settings.group_size,
        group_key=None if key is None else str(key),
        step=None if step is None else int(step),
    )


def _one_sample(
    solution_str: str, ground_truth: Any, extra_info: Mapping[str, Any] | None, **kwargs: Any
) -> tuple[AdapterSettings, GetRewardRequest]:
    settings = AdapterSettings.from_env(**kwargs)
    request = reward_request(
        responses=[solution_str],
        prompts=None,
        labels=[sample_label(ground_truth, extra_info, settings)],
        kind=settings.kind,
    )
    return settings, request


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: dict[str, Any] | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    settings, request = _one_sample(solution_str, ground_truth, extra_info, **kwargs)
    return per_sample(
        sync_client(settings).get_reward(request), 0, settings=settings, trainer=TRAINER
    )


async def compute_score_async(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: dict[str, Any] | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    settings, request = _one_sample(solution_str, ground_truth, extra_info, **kwargs)
    response = await async_client(settings).get_reward(request)
    return per_sample(response, 0, settings=settings, trainer=TRAINER)


def compute_score_batch(
    data_sources: Sequence[str],
    solution_strs: Sequence[str],
    ground_truths: Sequence[Any],
    extra_infos: Sequence[dict[str, Any] | None] | None = None,
    **kwargs: Any,
) -> list[dict[str, Any]]:
    """A whole batch in one request, for code that batches samples itself (veRL 0.9.1 has no
    batch reward manager: use `compute_score` or the `rubricate` reward manager there)."""
    settings = AdapterSettings.from_env(**kwargs)
    infos = list(extra_infos) if extra_infos is not None else [None] * len(solution_strs)
    request = reward_request(
        responses=list(solution_strs),
        prompts=None,
        labels=[sample_label(g, e, settings) for g, e in zip(ground_truths, infos, strict=True)],
        kind=settings.kind,
    )
    response = sync_client(settings).get_reward(request)
    missing = [i for i, r in enumerate(response.rewards) if r is None]
    if missing and settings.unscored_score is None:
        raise UnscoredSampleError(missing, trainer=TRAINER)
    return [
        per_sample(response, i, settings=settings, trainer=TRAINER)
        for i in range(len(solution_strs))
    ]
