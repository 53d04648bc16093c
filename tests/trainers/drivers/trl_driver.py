"""TRL 1.16 driver (run in .venvs/trl, alone or under torchrun): `GRPOTrainer.train()` for 2
steps on a tiny randomly initialised model and a tokenizer built offline, with
`RubricateReward` as the reward function. Rank 0 prints one JSON object.

MODE `plain` (default): TRL's own `GRPOTrainer`, completions sampled from the tiny model.
MODE `components`: TRL's own `GRPOTrainer` with `multi_objective_aggregation=
"normalize_then_sum"` over `RubricateComponentRewards` (one reward function per stage
component, weights from Λ), completions from `scripted_rollout` as below; each rank writes
`records-<rank>.json` with the advantages TRL computed and the components it was given.
MODE `stagewise` / `stagewise-off`: `StagewiseGRPOTrainer` with stage credit on / off. The
completions come from `scripted_rollout`, a FAKE generator (TRL's `rollout_func` hook) that
returns fixed Plan/Research/Review/Answer trajectories, because a random tiny model does not
write stages; scoring, advantages, the loss and the optimizer step are TRL's and
Rubricate's own. Each rank writes `records-<rank>.json` in WORKDIR: per step, its
completions' tokens, the advantages TRL's loss received and the platform's stage scores.

usage: python trl_driver.py GATEWAY_URL WORKDIR PER_DEVICE_BATCH [MODE]
"""

import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

import torch.distributed as dist
from datasets import Dataset
from tiny import SCRIPT, model, tokenizer
from trl import GRPOConfig, GRPOTrainer

from rubricate_client.trl import (
    RubricateComponentRewards,
    RubricateReward,
    StagewiseGRPOTrainer,
)

N = 4
PROMPTS = ["why was the orbiter lost", "why was the navigation team lost"]


class Captured(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def scripted_rollout(prompts: list[Any], trainer: Any) -> dict[str, Any]:
    """FAKE generation: the scripted trajectories of this step, by the completion's place in
    its group (rank-major, as TRL's sampler splits a group across processes)."""
    tok = trainer.processing_class
    rank = trainer.accelerator.process_index
    step = trainer.state.global_step
    prompt_ids, completion_ids = [], []
    for i, prompt in enumerate(prompts):
        g = rank * len(prompts) + i
        prompt_ids.append(tok(prompt, add_special_tokens=False)["input_ids"])
        text = SCRIPT[step % len(SCRIPT)][g % N]
        completion_ids.append(tok(text, add_special_tokens=False)["input_ids"] + [tok.eos_token_id])
    return {"prompt_ids": prompt_ids, "completion_ids": completion_ids, "logprobs": None}


class Recording(StagewiseGRPOTrainer):  # type: ignore[misc]
    """Records what the loss receives; changes nothing."""

    records: list[dict[str, Any]]

    def _generate_and_score_completions(self, inputs: Any) -> dict[str, Any]:
        output = super()._generate_and_score_completions(inputs)
        response = self.rubricate_reward.last_response
        ids = output["completion_ids"].tolist()
        mask = output["completion_mask"].tolist()
        tok = self.processing_class
        self.records.append(
            {
                "step": self.state.global_step,
                "rank": self.accelerator.process_index,
                "tokens": [
                    tok.convert_ids_to_tokens([t for t, m in zip(row, ms, strict=True) if m])
                    for row, ms in zip(ids, mask, strict=True)
                ],
                "advantages": output["advantages"].tolist(),
                "rewards": response.rewards,
                "extra_logs": response.extra_logs,
            }
        )
        return output


class RecordingPlain(GRPOTrainer):  # type: ignore[misc]
    """TRL's own GRPOTrainer, recording what its loss receives; changes nothing."""

    records: list[dict[str, Any]]
    components: RubricateComponentRewards

    def _generate_and_score_completions(self, inputs: Any) -> dict[str, Any]:
        output = super()._generate_and_score_completions(inputs)
        response = self.components.last_response
        ids = output["completion_ids"].tolist()
        mask = output["completion_mask"].tolist()
        tok = self.processing_class
        self.records.append(
            {
                "step": self.state.global_step,
                "rank": self.accelerator.process_index,
                "tokens": [
                    tok.convert_ids_to_tokens([t for t, m in zip(row, ms, strict=True) if m])
                    for row, ms in zip(ids, mask, strict=True)
                ],
                "advantages": output["advantages"].tolist(),
                "rewards": response.rewards,
                "extra_logs": response.extra_logs,
                "components": {c.name: c.values for c in response.components},
            }
        )
        return output


def main() -> None:
    url, workdir, per_device = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
    mode = sys.argv[4] if len(sys.argv) > 4 else "plain"
    rank = int(os.environ.get("RANK", "0"))
    captured = Captured()
    logging.getLogger("rubricate_client").addHandler(captured)
    tok = tokenizer(workdir / f"tokenizer-{rank}")
    net = model(workdir / f"model-{rank}", vocab_size=len(tok))
    dataset = Dataset.from_dict(
        {
            "prompt": PROMPTS,
            "label": [json.dumps({"question_id": f"q{i}"}) for i in range(len(PROMPTS))],
        }
    )
    args = GRPOConfig(
        output_dir=str(workdir / "out"),
        per_device_train_batch_size=per_device,
        num_generations=N,
        max_completion_length=12 if mode == "plain" else 64,
        **(
            {
                "multi_objective_aggregation": "normalize_then_sum",
                "reward_weights": RubricateComponentRewards(url).reward_weights,
            }
            if mode == "components"
            else {}
        ),
        max_steps=2,
        learning_rate=1e-3,
        beta=0.0,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        use_cpu=True,
        bf16=False,
        seed=0,
        disable_tqdm=True,
    )
    reward = RubricateReward(url, kind="stagewise", group_size=N)
    common = {
        "model": net,
        "reward_funcs": [reward],
        "args": args,
        "train_dataset": dataset,
        "processing_class": tok,
    }
    if mode == "plain":
        trainer = GRPOTrainer(**common)
    elif mode == "components":
        os.environ["TRL_EXPERIMENTAL_SILENCE"] = "1"
        components = RubricateComponentRewards(url, group_size=N)
        RecordingPlain.records = []
        RecordingPlain.components = components
        trainer = RecordingPlain(
            **{**common, "reward_funcs": components.reward_funcs}, rollout_func=scripted_rollout
        )
    else:
        os.environ["TRL_EXPERIMENTAL_SILENCE"] = "1"
        Recording.records = []
        trainer = Recording(
            **common, rollout_func=scripted_rollout, stage_credit=mode == "stagewise"
        )
    trainer.train()
    if mode != "plain":
        records = RecordingPlain.records if mode == "components" else Recording.records
        (workdir / f"records-{rank}.json").write_text(
            json.dumps({"records": records, "log_lines": captured.lines})
        )
    if dist.is_available() and dist.is_initialized():
        # torchrun: leave the process group before exit, or gloo's threads can still be
        # running at interpreter teardown ("terminate called without an active exception")
        dist.barrier()
    if rank == 0:
        print(
            json.dumps(
                {
                    "global_step": trainer.state.global_step,
                    "world_size": trainer.accelerator.num_processes,
                    "log_keys": sorted({k for entry in trainer.state.log_history for k in entry}),
                    "log_history": trainer.state.log_history,
                    "log_lines": captured.lines,
                }
            ),
            flush=True,
        )
    if dist.is_available() and dist.is_initialized():
        # Under torchrun the process ends here, without freeing the DDP-wrapped model: freeing
        # it (at main's return) runs the gloo process group's destructor, which joins a worker
        # thread that waits for the GIL this thread holds. A deadlock of torch's teardown,
        # seen in `make test` with py-spy (~ProcessGroupGloo -> std::thread::join, and
        # ~AsyncAllgatherWork -> gil_scoped_acquire): rank 0 never exited and the test waited
        # out its limit. Both ranks passed the barrier; everything reported is written.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


if __name__ == "__main__":
    main()
