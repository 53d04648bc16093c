"""veRL 0.9.1 driver (run in .venvs/verl): veRL's own reward loop worker, with the rubricate
reward manager picked from veRL's registry, scores a DataProto built as veRL's agent loop
builds it (2 prompts x 4 samples, one `run_single` per sample, concurrently as
`RewardLoopWorker.compute_score_batch` does); then `assemble_rm_scores` and the registered
`rubricate_ssgrpo` advantage estimator. Prints one JSON object.

With MODE `compute_score` or `compute_score_async`, veRL's default `naive` manager calls that
reward function of `rubricate_client/verl.py` instead (scalar rewards, no estimator).

usage: python verl_driver.py GATEWAY_URL WORKDIR [MODE]
"""

import json
import os
import sys
from pathlib import Path

os.environ.setdefault("VERL_USE_EXTERNAL_MODULES", "rubricate_client.verl_manager")

import numpy as np
import torch
from omegaconf import OmegaConf
from tensordict import TensorDict
from tiny import tokenizer
from verl import DataProto
from verl.experimental.reward_loop.reward_loop import RewardLoopWorker
from verl.experimental.reward_loop.reward_manager import NaiveRewardManager
from verl.trainer.config import AlgoConfig
from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage, get_adv_estimator_fn

N = 4
QUESTIONS = {"q-mco": "why was the orbiter lost", "q-nav": "why was the navigation team lost"}


QUALITY = {"a": "[[excellent]]", "b": "[[poor]]", "e": "[[poor]]"}
"""The fake judge scores a stage 2 with [[excellent]] in it, 0 with [[poor]], else 1."""


def trajectory(marker: str) -> str:
    q = QUALITY.get(marker, "")
    return (
        f"<think> plan </think> <structured_plan> plan {q} {marker} </structured_plan> "
        f"<call_tool> search {q} {marker} </call_tool> <tool_output> units </tool_output> "
        f"<think> audit </think> <review> gaps {q} {marker} </review> "
        f"<answer> final {marker} {q} </answer>"
    )


def build(tok) -> DataProto:  # type: ignore[no-untyped-def]
    """As veRL's agent loop `_compute_score`: left-padded prompts, right-padded responses."""
    rows = []
    for g, (qid, question) in enumerate(QUESTIONS.items()):
        uid = f"uid-{qid}"
        for i in range(N):
            rows.append((g, question, uid, trajectory("abcdefgh"[g * N + i])))
    prompts = [tok(q, add_special_tokens=False)["input_ids"] for _, q, _, _ in rows]
    responses = [tok(r, add_special_tokens=False)["input_ids"] for _, _, _, r in rows]
    p_len, r_len = max(map(len, prompts)), max(map(len, responses)) + 2
    pad = tok.pad_token_id
    p_ids = torch.tensor([[pad] * (p_len - len(p)) + p for p in prompts])
    r_ids = torch.tensor([r + [pad] * (r_len - len(r)) for r in responses])
    p_mask = torch.tensor([[0] * (p_len - len(p)) + [1] * len(p) for p in prompts])
    r_mask = torch.tensor([[1] * len(r) + [0] * (r_len - len(r)) for r in responses])
    mask = torch.cat([p_mask, r_mask], dim=1)
    batch = TensorDict(
        {
            "prompts": p_ids,
            "responses": r_ids,
            "attention_mask": mask,
            "input_ids": torch.cat([p_ids, r_ids], dim=1),
            "position_ids": torch.clamp(torch.cumsum(mask, dim=1) - 1, min=0),
        },
        batch_size=len(rows),
    )
    # the dataset row's label and extra_info, repeated for the n samples of a prompt
    labels = [json.dumps({"question": q}) for _, q, _, _ in rows]
    non_tensor = {
        "data_source": np.array(["rubricate"] * len(rows), dtype=object),
        "reward_model": np.array([{"ground_truth": g} for g in labels], dtype=object),
        "extra_info": np.array([{"index": g} for g, _, _, _ in rows], dtype=object),
        "uid": np.array([uid for _, _, uid, _ in rows], dtype=object),
    }
    return DataProto(batch=batch, non_tensor_batch=non_tensor)


def main() -> None:
    url, workdir = sys.argv[1], Path(sys.argv[2])
    mode = sys.argv[3] if len(sys.argv) > 3 else "manager"
    tok = tokenizer(workdir / "tokenizer")
    manager = {
        "source": "importlib",
        "name": "RubricateRewardManager",
        "module": {"path": "pkg://rubricate_client.verl_manager"},
    }
    function = {"path": None, "name": None}
    if mode != "manager":
        manager = {"source": "register", "name": "naive"}
        function = {"path": "pkg://rubricate_client.verl", "name": mode}
    config = OmegaConf.create(
        {
            "actor_rollout_ref": {
                "model": {"path": str(workdir / "tokenizer"), "tokenizer_path": None},
                "rollout": {"n": N},
            },
            "reward": {
                "reward_manager": manager,
                "custom_reward_function": {
                    **function,
                    "reward_kwargs": {"url": url, "kind": "stagewise", "group_size": N},
                },
                "reward_model": {"enable": False},
                "sandbox_fusion": None,
            },
        }
    )
    worker = RewardLoopWorker(config)
    data = build(tok)
    outputs = worker.loop.run_until_complete(worker.compute_score_batch(data))
    # as RewardLoopManager.compute_rm_score
    scores = [o["reward_score"] for o in outputs]
    rm_scores = worker.reward_manager.assemble_rm_scores(data, scores)
    infos = [o["reward_extra_info"] for o in outputs]
    keys = list(infos[0])
    arrays = {k: np.array([info[k] for info in infos]).tolist() for k in keys}
    if mode != "manager":
        print(json.dumps({"manager": type(worker.reward_manager).__name__, "extra": arrays}))
        return
    prompt_len = data.batch["prompts"].size(1)
    response_mask = data.batch["attention_mask"][:, prompt_len:]
    estimator = get_adv_estimator_fn("rubricate_ssgrpo")
    advantages, returns = estimator(
        token_level_rewards=rm_scores,
        response_mask=response_mask,
        index=data.non_tensor_batch["uid"],
        config=AlgoConfig(adv_estimator="rubricate_ssgrpo"),
    )
    # veRL's own layout (a scalar on the last token, as its streamed path writes it): the
    # estimator, centring only, is veRL's GRPO without std scaling
    scalar = NaiveRewardManager.assemble_rm_scores(data, [float(x) for x in scores])
    uid = data.non_tensor_batch["uid"]
    centred, _ = estimator(
        token_level_rewards=scalar,
        response_mask=response_mask,
        index=uid,
        config=AlgoConfig(adv_estimator="rubricate_ssgrpo", norm_adv_by_std_in_grpo=False),
    )
    grpo, _ = compute_grpo_outcome_advantage(
        scalar, response_mask, uid, norm_adv_by_std_in_grpo=False
    )
    try:
        estimator(
            token_level_rewards=rm_scores,
            response_mask=response_mask,
            index=uid,
            config=AlgoConfig(adv_estimator="rubricate_ssgrpo", use_kl_in_reward=True),
        )
        kl_refused = False
    except ValueError:
        kl_refused = True
    print(
        json.dumps(
            {
                "scalar_vs_grpo": float((centred - grpo).abs().max()),
                "scalar_spread": float(grpo.abs().max()),
                "kl_refused": kl_refused,
                "manager": type(worker.reward_manager).__name__,
                "scores": [float(s) for s in scores],
                "key_sets": sorted({tuple(sorted(i)) for i in infos}),
                "extra": arrays,
                # the marked token rewards: non-zero, or -0.0 (a stage increment of 0)
                "rm_marked": [
                    [
                        [j, float(row[j])]
                        for j in torch.nonzero((row != 0) | torch.signbit(row)).flatten().tolist()
                    ]
                    for row in rm_scores
                ],
                "advantages": advantages.tolist(),
                "returns": returns.tolist(),
                "response_mask": response_mask.tolist(),
            }
        )
    )


if __name__ == "__main__":
    main()
