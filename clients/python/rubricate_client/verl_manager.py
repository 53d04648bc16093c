"""veRL 0.9.1: the `rubricate` reward manager and the `rubricate_ssgrpo` advantage estimator.
Importing this module (in the trainer's environment, where veRL and PyTorch are installed)
registers both with veRL's own registries:

    reward:
      reward_manager: {source: importlib, name: RubricateRewardManager,
                       module: {path: "pkg://rubricate_client.verl_manager"}}
      # or, with VERL_USE_EXTERNAL_MODULES=rubricate_client.verl_manager:
      # reward_manager: {source: register, name: rubricate}
    algorithm:
      adv_estimator: rubricate_ssgrpo       # needs VERL_USE_EXTERNAL_MODULES (above)
      use_kl_in_reward: false

The manager sends each sample veRL hands it (`run_single`) to `/get_reward` with the prompt and
its group fields: `group_key` = veRL's `uid` (the same for the n samples of one prompt in one
step), `group_size` = `actor_rollout_ref.rollout.n`, `step` where veRL says it. The gateway
gathers the group and scores it once. The reward (`reward_score`) is R_answer; it carries
each stage's reward and the index of the stage's last response token (stage spans of the
response text mapped with the trainer's tokenizer), and `assemble_rm_scores` puts each stage's
reward on that token. veRL calls `assemble_rm_scores` where it computes rewards after the
rollout (`RewardLoopManager.compute_rm_score`); where it streams rewards during the rollout
(the agent loop, its default without a reward model) veRL itself writes the scalar R_answer
on the last token, and the estimator then reduces to GRPO on R_answer.

The estimator reads the stage rewards back from `token_level_rewards`: a response carries
either one reward per stage, at each stage's last token (all four stages scored), or a single
reward (the answer only: a fallback, a partly scored sample, or a scalar reward). A scored
stage reward of exactly 0 is written as -0.0, so that its position survives (a value that is
not +0.0 marks a stage end). It computes RubricEM's per-stage returns and per-stage group
advantages (`rubricate_client.ssgrpo`) per veRL group (`uid`) and gives every token its
stage's advantage. Per-token credit needs the stage rewards in the reward tensor, so
`use_kl_in_reward` (which adds a penalty to every token) is refused: use the KL loss.
"""

import asyncio
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from verl import DataProto  # type: ignore[import-not-found]
from verl.experimental.reward_loop.reward_manager import (  # type: ignore[import-not-found]
    register,
)
from verl.experimental.reward_loop.reward_manager.base import (  # type: ignore[import-not-found]
    RewardManagerBase,
)
from verl.experimental.reward_loop.reward_manager.registry import (  # type: ignore[import-not-found]
    REWARD_MANAGER,
)
from verl.trainer.ppo.core_algos import (  # type: ignore[import-not-found]
    ADV_ESTIMATOR_REGISTRY,
    register_adv_est,
)

from rubricate_client.constants import DEFAULT_LAMBDA, N_STAGES, STAGES, Stage
from rubricate_client.ssgrpo import stage_advantages, stage_returns
from rubricate_client.stages import stage_spans
from rubricate_client.tokens import token_ranges
from rubricate_client.trainers import (
    AdapterSettings,
    async_client,
    merge_label,
    per_sample,
    reward_request,
    with_group,
)

MANAGER_NAME = "rubricate"
ESTIMATOR_NAME = "rubricate_ssgrpo"
TRAINER = "veRL"
STAGE_END_KEYS = tuple(f"stage_end_{s}" for s in STAGES)
"""reward_extra_info: the index of each stage's last response token (-1: no such stage)."""


class StageReward(float):
    """A sample's scalar reward (R_answer) that also carries where each stage's reward goes:
    `(token index, reward)` per stage, in stage order; empty when only the scalar applies."""

    stage_tokens: tuple[tuple[int, float], ...]

    def __new__(cls, value: float, stage_tokens: Sequence[tuple[int, float]] = ()) -> "StageReward":
        out = super().__new__(cls, value)
        out.stage_tokens = tuple(stage_tokens)
        return out

    def __reduce__(self) -> tuple[Any, ...]:
        return (StageReward, (float(self), self.stage_tokens))


def response_offsets(tokenizer: Any, ids: Sequence[int], text: str) -> list[tuple[int, int]]:
    """Character offsets of each response token in `text` (= the decoded response): the
    tokenizer's offset mapping when re-encoding the text gives the same ids, else the lengths
    of the decoded prefixes (exact for any tokenizer, slower)."""
    ids = [int(i) for i in ids]
    try:
        encoded = tokenizer(text, return_offsets_mapping=True, add_special_tokens=False)
        if [int(i) for i in encoded["input_ids"]] == ids:
            return [(int(a), int(b)) for a, b in encoded["offset_mapping"]]
    except (NotImplementedError, TypeError, ValueError, KeyError):
        pass
    offsets = []
    previous = 0
    for i in range(len(ids)):
        end = max(previous, len(tokenizer.decode(ids[: i + 1], skip_special_tokens=True)))
        offsets.append((previous, end))
        previous = end
    return offsets


def stage_placement(
    logs: Mapping[str, float],
    offsets: Sequence[tuple[int, int]],
    text: str,
) -> tuple[dict[Stage, int], list[tuple[int, float]]]:
    """Each stage's last token, and the stage rewards to place: one per stage when all four
    stages were scored and found in the tokens, else none (the answer-only scalar)."""
    ranges = token_ranges(offsets, {str(s): span for s, span in stage_spans(text).items()})
    ends: dict[Stage, int] = {}
    for stage in STAGES:
        found = ranges[stage]
        ends[stage] = found[1] - 1 if found is not None else -1
    full = logs.get("scored", 0.0) > 0.5 and logs.get("fallback", 0.0) < 0.5
    positions = [ends[s] for s in STAGES]
    if not full or min(positions) < 0 or len(set(positions)) < N_STAGES:
        return ends, []
    return ends, [(ends[s], float(logs[f"R_{s}"])) for s in STAGES]


class RubricateRewardManager(RewardManagerBase):  # type: ignore[misc]
    """veRL reward manager: one `/get_reward` request per sample with its group fields."""

    def __init__(
        self,
        config: Any,
        tokenizer: Any,
        compute_score: Any = None,
        reward_router_address: str | None = None,
        reward_model_tokenizer: Any = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(config, tokenizer, compute_score)
        reward_cfg = _get(config, "reward", "custom_reward_function", "reward_kwargs") or {}
        options = {**dict(reward_cfg), **kwargs}
        options.setdefault("group_size", _get(config, "actor_rollout_ref", "rollout", "n"))
        self.settings = AdapterSettings.from_env(**options)

    async def run_single(self, data: DataProto) -> dict[str, Any]:
        item = data[-1]
        prompt_ids = item.batch["prompts"]
        response_ids = item.batch["responses"]
        prompt_length = prompt_ids.shape[-1]
        mask = item.batch["attention_mask"]
        valid_prompt = prompt_ids[prompt_length - int(mask[:prompt_length].sum()) :]
        valid_response = response_ids[: int(mask[prompt_length:].sum())].tolist()
        prompt = self.tokenizer.decode(valid_prompt, skip_special_tokens=True)
        response = self.tokenizer.decode(valid_response, skip_special_tokens=True)

        extra = dict(item.non_tensor_batch.get("extra_info") or {})
        reward_model = item.non_tensor_batch.get("reward_model") or {}
        uid = item.non_tensor_batch.get("uid")
        step = extra.get("step", data.meta_info.get("global_steps"))
        label = with_group(
            merge_label(reward_model.get("ground_truth"), extra),
            group_size=self.settings.group_size,
            group_key=None if uid is None else str(uid),
            step=None if step is None or int(step) < 0 else int(step),
        )
        request = reward_request(
            responses=[response], prompts=[prompt], labels=[label], kind=self.settings.kind
        )
        result = await async_client(self.settings).get_reward(request)
        logs = per_sample(result, 0, settings=self.settings, trainer=TRAINER)
        offsets = await asyncio.get_running_loop().run_in_executor(
            None, lambda: response_offsets(self.tokenizer, valid_response, response)
        )
        ends, placed = stage_placement(logs, offsets, response)
        info = {**logs, **{f"stage_end_{s}": float(ends[s]) for s in STAGES}}
        return {"reward_score": StageReward(logs["score"], placed), "reward_extra_info": info}

    @classmethod
    def assemble_rm_scores(cls, data: DataProto, scores: list[float]) -> torch.Tensor:
        """veRL's layout (the scalar on the last response token), with each stage's reward on
        the stage's last token where the sample carries stage rewards."""
        prompt_length = data.batch["prompts"].size(1)
        lengths = data.batch["attention_mask"][:, prompt_length:].sum(dim=1)
        rm_scores = torch.zeros_like(data.batch["responses"], dtype=torch.float32)
        for i, score in enumerate(scores):
            placed = getattr(score, "stage_tokens", ())
            if not placed:
                rm_scores[i, int(lengths[i]) - 1] = float(score)
            for token, value in placed:
                rm_scores[i, token] = value if value != 0.0 else -0.0
        return rm_scores


def stage_scores(row: torch.Tensor, length: int) -> tuple[list[float | None], list[int]]:
    """One response's stage rewards (None: a stage without a reward) and stage end tokens,
    read from its token rewards as `assemble_rm_scores` wrote them."""
    values = row[:length]
    marked = (values != 0) | torch.signbit(values)
    ends = [int(i) for i in torch.nonzero(marked).flatten().tolist()]
    if len(ends) == N_STAGES:
        return [float(values[i]) for i in ends], ends
    if len(ends) <= 1:
        answer = float(values.sum())
        return [None] * (N_STAGES - 1) + [answer], [-1] * (N_STAGES - 1) + [length - 1]
    raise ValueError(
        f"a response carries {len(ends)} stage rewards: expected {N_STAGES} (one per stage, "
        "from the rubricate reward manager) or 1 (a scalar reward)"
    )


def compute_ssgrpo_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray[Any, Any],
    epsilon: float = 1e-6,
    norm_adv_by_std_in_grpo: bool = True,
    config: Any = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """RubricEM's SS-GRPO advantages per token: each token gets the advantage of its stage,
    normalized per stage across its veRL group (`index`, the uid). Returns (advantages,
    returns), both (batch, response_length), zero outside the response mask."""
    if config is not None and _get(config, "use_kl_in_reward"):
        raise ValueError(
            f"{ESTIMATOR_NAME} reads the stage rewards from the reward tensor: set "
            "algorithm.use_kl_in_reward=false (use the actor's KL loss instead)"
        )
    if config is not None and _get(config, "norm_adv_by_std_in_grpo") is not None:
        norm_adv_by_std_in_grpo = bool(_get(config, "norm_adv_by_std_in_grpo"))
    lengths = response_mask.sum(dim=-1).tolist()
    rows = [stage_scores(token_level_rewards[i], int(n)) for i, n in enumerate(lengths)]
    groups: dict[Any, list[int]] = defaultdict(list)
    for i, uid in enumerate(index):
        groups[uid].append(i)
    advantages = torch.zeros_like(token_level_rewards, dtype=torch.float32)
    returns = torch.zeros_like(token_level_rewards, dtype=torch.float32)
    for members in groups.values():
        g = stage_returns([rows[i][0] for i in members], lam=DEFAULT_LAMBDA)
        a = stage_advantages(g, eps=epsilon, scale=norm_adv_by_std_in_grpo)
        if len(members) == 1:  # a group of one has no baseline (as veRL's GRPO)
            a = [[None if v is None else 0.0 for v in a[0]]]
        for pos, i in enumerate(members):
            start = 0
            for k, end in enumerate(rows[i][1]):
                if k == N_STAGES - 1:
                    end = max(end, int(lengths[i]) - 1)  # trailing special tokens: the answer's
                if end < start:
                    continue
                adv, ret = a[pos][k], g[pos][k]
                if adv is not None and ret is not None and math.isfinite(adv):
                    advantages[i, start : end + 1] = adv
                    returns[i, start : end + 1] = ret
                start = end + 1
    return advantages * response_mask, returns * response_mask


# Registered once per process: veRL may import this module by name (VERL_USE_EXTERNAL_MODULES,
# pkg://) and again from its file path (a second module object), and its registries refuse a
# second, different object under one name.
if MANAGER_NAME not in REWARD_MANAGER:
    register(MANAGER_NAME)(RubricateRewardManager)
if ESTIMATOR_NAME not in ADV_ESTIMATOR_REGISTRY:
    register_adv_est(ESTIMATOR_NAME)(compute_ssgrpo_advantage)


def _get(config: Any, *path: str) -> Any:
    for key in path:
        if config is None:
            return None
        getter = getattr(config, "get", None)
        config = getter(key) if callable(getter) else getattr(config, key, None)
    return config
