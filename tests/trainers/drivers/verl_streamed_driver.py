"""veRL 0.9.1 driver (run in .venvs/verl): the streamed reward path, veRL's default without a
reward model, through veRL's own code, with stage credit on or off
(RUBRICATE_STAGE_CREDIT, read when `import verl` imports rubricate_client.verl_manager).

Each sample goes through veRL's agent-loop worker as it does during a rollout:
`AgentLoopWorker._compute_score` sends it to a `RewardLoopWorker` (whose manager is the
rubricate manager) and stores `reward_score` and `reward_extra_info`; then

- the v1 trainer's path (`trainer.use_v1=true`, the default): `AgentLoopOutput.as_dict()`
  builds the sample's `rm_scores`, the samples are padded as the v1 trainer reads them back,
  and `compute_advantage_for_multi_trajectories` runs the estimator;
- the legacy trainer's path: `AgentLoopWorker._agent_loop_postprocess` pads each sample,
  `AgentLoopWorker._postprocess` builds the batch's `rm_scores`, and `compute_advantage`
  runs the estimator.

Both with `adv_estimator=rubricate_ssgrpo`, and once more with veRL's own `grpo`. The agent
loop worker is built without its constructor (no LLM server) and reaches the reward worker
through `InProcessRayHandle`, a FAKE Ray actor handle that calls the worker in process:
orchestration only; everything that computes is veRL's and Rubricate's own code.

usage: python verl_streamed_driver.py GATEWAY_URL WORKDIR
"""

import asyncio
import json
import logging
import os
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

os.environ.setdefault("VERL_USE_EXTERNAL_MODULES", "rubricate_client.verl_manager")


class Captured(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


CAPTURED = Captured()
logging.getLogger("rubricate_client").addHandler(CAPTURED)

# the handler above must be in place before `import verl` imports the manager (its log lines)
import numpy as np  # noqa: E402
import torch  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402
from tiny import tokenizer, trajectory  # noqa: E402
from verl import DataProto  # noqa: E402
from verl.experimental.agent_loop.agent_loop import (  # noqa: E402
    AgentLoopMetrics,
    AgentLoopOutput,
    AgentLoopWorker,
)
from verl.experimental.reward_loop.reward_loop import RewardLoopWorker  # noqa: E402
from verl.trainer.config import AlgoConfig  # noqa: E402
from verl.trainer.ppo.ray_trainer import compute_advantage  # noqa: E402
from verl.trainer.ppo.v1.utils import compute_advantage_for_multi_trajectories  # noqa: E402

import rubricate_client.verl_manager as manager  # noqa: E402

N = 4
QUESTIONS = {"q-mco": "why was the orbiter lost", "q-nav": "why was the navigation team lost"}
SAMPLES = [
    ("a", "[[excellent]]", True),
    ("b", "[[poor]]", True),
    ("c", "", True),
    ("d", "[[fail-stagewise]]", True),  # scored on its answer only (fallback)
    ("e", "", False),  # no review stage
    ("f", "[[excellent]]", True),
    ("g", "", True),
    ("h", "[[poor]]", True),
]
TOOL_OUTPUT = ("<tool_output>", "units", "</tool_output>")
"""Tool output inside a response: veRL's agent loop masks it out of the loss (mask 0)."""


class InProcessRayHandle:
    """FAKE Ray actor handle: `handle.compute_score.remote(data)` awaits the worker's
    `compute_score(data)` in this process (what Ray would run in the reward worker)."""

    def __init__(self, worker: RewardLoopWorker) -> None:
        self.compute_score = SimpleNamespace(remote=worker.compute_score)


def agent_loop_worker(tok: Any, reward_worker: RewardLoopWorker, lengths: tuple[int, int]) -> Any:
    worker = object.__new__(AgentLoopWorker)
    worker.reward_loop_worker_handles = [InProcessRayHandle(reward_worker)]
    worker.tokenizer = tok
    worker.processor = None
    worker.mm_processor_kwargs = {}
    worker.distillation_enabled = False
    worker.rollout_config = SimpleNamespace(prompt_length=lengths[0], response_length=lengths[1])
    return worker


def sample_outputs(tok: Any, path: str) -> list[tuple[AgentLoopOutput, dict[str, Any]]]:
    out = []
    for i, (marker, quality, review) in enumerate(SAMPLES):
        qid, question = list(QUESTIONS.items())[i // N]
        prompt_ids = tok(question, add_special_tokens=False)["input_ids"]
        text = trajectory(marker, quality, review=review)
        response_ids = tok(text, add_special_tokens=False)["input_ids"]
        words = text.split()
        mask = [1] * len(words)
        for j in range(len(words) - 2):
            if tuple(words[j : j + 3]) == TOOL_OUTPUT:
                mask[j : j + 3] = [0, 0, 0]
        output = AgentLoopOutput(
            prompt_ids=prompt_ids,
            response_ids=response_ids,
            response_mask=mask,
            num_turns=3,
            metrics=AgentLoopMetrics(),
        )
        kwargs = {
            "raw_prompt": [{"role": "user", "content": question}],
            "uid": f"{path}-{qid}",
            "data_source": "rubricate",
            "reward_model": {"ground_truth": json.dumps({"question": question})},
            "extra_info": {"index": i // N},
        }
        out.append((output, kwargs))
    return out


def algo(estimator: str) -> AlgoConfig:
    return AlgoConfig(adv_estimator=estimator, norm_adv_by_std_in_grpo=True)


async def v1_path(tok: Any, reward_worker: RewardLoopWorker) -> dict[str, Any]:
    worker = agent_loop_worker(tok, reward_worker, (16, 64))
    samples = sample_outputs(tok, "v1")
    await asyncio.gather(*(worker._compute_score([o], kwargs=k) for o, k in samples))
    fields = [o.as_dict() for o, _ in samples]
    # as the v1 trainer reads them back from TransferQueue: jagged, padded with zeros
    rm = torch.nested.nested_tensor([f["rm_scores"] for f in fields], layout=torch.jagged)
    mask = torch.nested.nested_tensor([f["response_mask"] for f in fields], layout=torch.jagged)
    keys = [f"{k['uid']}_{i}_0" for i, (_, k) in enumerate(samples)]
    results = {}
    for estimator in ("rubricate_ssgrpo", "grpo"):
        data = DataProto.from_dict(
            tensors={
                "token_level_rewards": rm.to_padded_tensor(0.0),
                "response_mask": mask.to_padded_tensor(0),
            },
            non_tensors={"uid": np.array([k["uid"] for _, k in samples], dtype=object)},
        )
        data = compute_advantage_for_multi_trajectories(
            data,
            batch_keys=keys,
            adv_estimator=estimator,
            norm_adv_by_std_in_grpo=True,
            config=algo(estimator),
        )
        results[estimator] = [
            row[: len(f["response_mask"])]
            for row, f in zip(data.batch["advantages"].tolist(), fields, strict=True)
        ]
    return {
        "response_ids": [f["responses"].tolist() for f in fields],
        "response_mask": [f["response_mask"].tolist() for f in fields],
        "rm_scores": [f["rm_scores"].tolist() for f in fields],
        "signbits": [torch.signbit(f["rm_scores"]).tolist() for f in fields],
        "extra": [f["extra_fields"]["reward_extra_info"] for f in fields],
        "advantages": results["rubricate_ssgrpo"],
        "grpo": results["grpo"],
    }


async def legacy_path(tok: Any, reward_worker: RewardLoopWorker) -> dict[str, Any]:
    worker = agent_loop_worker(tok, reward_worker, (16, 64))
    samples = sample_outputs(tok, "v0")
    internals = await asyncio.gather(
        *(worker._agent_loop_postprocess(o, False, **k) for o, k in samples)
    )
    data = worker._postprocess(list(internals), input_non_tensor_batch=None, validate=False)
    # the legacy trainer unions the generated batch with the prompts' batch (uid) and reads
    # rm_scores as the token-level rewards
    data.non_tensor_batch["uid"] = np.array([k["uid"] for _, k in samples], dtype=object)
    prompt_length = data.batch["prompts"].size(1)
    lengths = data.batch["attention_mask"][:, prompt_length:].sum(dim=1).tolist()
    rm_scores = data.batch["rm_scores"].clone()
    results = {}
    for estimator in ("rubricate_ssgrpo", "grpo"):
        batch = DataProto.from_dict(
            tensors={
                "token_level_rewards": rm_scores.clone(),
                "response_mask": data.batch["response_mask"].clone(),
            },
            non_tensors={"uid": data.non_tensor_batch["uid"]},
        )
        batch = compute_advantage(
            batch, adv_estimator=estimator, norm_adv_by_std_in_grpo=True, config=algo(estimator)
        )
        results[estimator] = batch.batch["advantages"].tolist()
    extra_keys = data.meta_info["reward_extra_keys"]
    return {
        "response_ids": [
            row[:n] for row, n in zip(data.batch["responses"].tolist(), lengths, strict=True)
        ],
        "response_mask": [
            row[:n] for row, n in zip(data.batch["response_mask"].tolist(), lengths, strict=True)
        ],
        "rm_scores": [row[:n] for row, n in zip(rm_scores.tolist(), lengths, strict=True)],
        "signbits": [
            row[:n] for row, n in zip(torch.signbit(rm_scores).tolist(), lengths, strict=True)
        ],
        "extra": [
            {k: float(data.non_tensor_batch[k][i]) for k in extra_keys} for i in range(len(data))
        ],
        "advantages": [
            row[:n] for row, n in zip(results["rubricate_ssgrpo"], lengths, strict=True)
        ],
        "grpo": [row[:n] for row, n in zip(results["grpo"], lengths, strict=True)],
    }


def main() -> None:
    url, workdir = sys.argv[1], Path(sys.argv[2])
    tok = tokenizer(workdir / "tokenizer")
    config = OmegaConf.create(
        {
            "actor_rollout_ref": {
                "model": {"path": str(workdir / "tokenizer"), "tokenizer_path": None},
                "rollout": {"n": N},
            },
            "reward": {
                "reward_manager": {"source": "register", "name": manager.MANAGER_NAME},
                "custom_reward_function": {
                    "path": None,
                    "name": None,
                    "reward_kwargs": {"url": url, "kind": "stagewise", "group_size": N},
                },
                "reward_model": {"enable": False},
                "sandbox_fusion": None,
            },
        }
    )
    reward_worker = RewardLoopWorker(config)
    loop = reward_worker.loop
    v1 = loop.run_until_complete(v1_path(tok, reward_worker))
    legacy = loop.run_until_complete(legacy_path(tok, reward_worker))
    print(
        json.dumps(
            {
                "manager": type(reward_worker.reward_manager).__name__,
                "shim": bool(getattr(AgentLoopOutput.as_dict, manager.SHIM_MARK, False))
                and bool(getattr(AgentLoopWorker._postprocess, manager.SHIM_MARK, False)),
                "log_lines": CAPTURED.lines,
                "tokens": [tok.convert_ids_to_tokens(ids) for ids in v1["response_ids"]],
                "v1": v1,
                "legacy": legacy,
            }
        )
    )


if __name__ == "__main__":
    main()
