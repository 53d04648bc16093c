"""veRL 0.9.1 driver (run in .venvs/verl): Rubricate's stage components through veRL's own
GDPO path. veRL's `gdpo` reward manager (from its registry) calls
`rubricate_client.verl.compute_score` for each sample of a DataProto (2 prompts x 4 samples,
concurrently, as `RewardLoopWorker.compute_score_batch` does); the samples' reward_extra_info
become the batch's non_tensor_batch as `RewardLoopManager.compute_rm_score` builds it; then
veRL's `compute_advantage` (ray_trainer; the v1 trainer delegates every estimator but GRPO to
it) runs the `gdpo` estimator with `gdpo_reward_keys` = the stage components and
`gdpo_reward_weights` = Λ's column sums. Prints one JSON object.

usage: python verl_gdpo_driver.py GATEWAY_URL WORKDIR
"""

import json
import re
import sys
from pathlib import Path

import numpy as np
import verl_driver
from omegaconf import OmegaConf
from tiny import tokenizer
from verl import DataProto
from verl.experimental.reward_loop.reward_loop import RewardLoopWorker
from verl.trainer.config import AlgoConfig
from verl.trainer.ppo.ray_trainer import compute_advantage

from rubricate_client.stagecredit import component_weights
from rubricate_client.verl import GDPO_REWARD_KEYS

N = verl_driver.N
# a: every stage 2, b: 0, c/g/h: 1, d: scored on its answer only (the judge's fallback),
# e: 0, f: 2 (the fake judge's markers); g has no review stage (R_review: the platform's
# missing-stage score, 0)
verl_driver.QUALITY.update({"d": "[[fail-stagewise]]", "f": "[[excellent]]"})
_full = verl_driver.trajectory


def _trajectory(marker: str) -> str:
    text = _full(marker)
    if marker == "g":
        text = re.sub(r"<think> audit </think> <review>.*?</review> ", "", text)
    return text


verl_driver.trajectory = _trajectory


def main() -> None:
    url, workdir = sys.argv[1], Path(sys.argv[2])
    tok = tokenizer(workdir / "tokenizer")
    config = OmegaConf.create(
        {
            "actor_rollout_ref": {
                "model": {"path": str(workdir / "tokenizer"), "tokenizer_path": None},
                "rollout": {"n": N},
            },
            "trainer": {"experiment_name": "rubricate-gdpo"},
            "reward": {
                "reward_manager": {"source": "register", "name": "gdpo"},
                "custom_reward_function": {
                    "path": "pkg://rubricate_client.verl",
                    "name": "compute_score",
                    "reward_kwargs": {"url": url, "kind": "stagewise", "group_size": N},
                },
                "reward_model": {"enable": False},
                "sandbox_fusion": None,
            },
        }
    )
    worker = RewardLoopWorker(config)
    data = verl_driver.build(tok)
    outputs = worker.loop.run_until_complete(worker.compute_score_batch(data))
    scores = [o["reward_score"] for o in outputs]
    # as RewardLoopManager.compute_rm_score: the scalar on the last token, the extra info as
    # non_tensor_batch arrays
    rm_scores = worker.reward_manager.assemble_rm_scores(data, scores)
    infos = [o["reward_extra_info"] for o in outputs]
    extra = {k: np.array([info[k] for info in infos]) for k in infos[0]}
    batch = data.batch.clone()
    batch["token_level_rewards"] = rm_scores
    proto = DataProto(batch=batch, non_tensor_batch={**data.non_tensor_batch, **extra})
    weights = list(component_weights())
    algo = AlgoConfig(
        adv_estimator="gdpo",
        gdpo_reward_keys=list(GDPO_REWARD_KEYS),
        gdpo_reward_weights=weights,
    )
    out = compute_advantage(proto, adv_estimator="gdpo", config=algo)
    prompt_len = data.batch["prompts"].size(1)
    print(
        json.dumps(
            {
                "manager": type(worker.reward_manager).__name__,
                "weights": weights,
                "scores": [float(s) for s in scores],
                "extra": {k: v.tolist() for k, v in extra.items()},
                "advantages": out.batch["advantages"].tolist(),
                "response_mask": data.batch["attention_mask"][:, prompt_len:].tolist(),
                "uid": data.non_tensor_batch["uid"].tolist(),
            }
        )
    )


if __name__ == "__main__":
    main()
