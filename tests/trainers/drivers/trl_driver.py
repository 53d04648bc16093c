"""TRL 1.16 driver (run in .venvs/trl, alone or under torchrun): `GRPOTrainer.train()` for 2
steps on a tiny randomly initialised model and a tokenizer built offline, with
`RubricateReward` as the reward function. Rank 0 prints one JSON object.

usage: python trl_driver.py GATEWAY_URL WORKDIR PER_DEVICE_BATCH
"""

import json
import os
import sys
from pathlib import Path

import torch.distributed as dist
from datasets import Dataset
from tiny import model, tokenizer
from trl import GRPOConfig, GRPOTrainer

from rubricate_client.trl import RubricateReward

N = 4
PROMPTS = ["why was the orbiter lost", "why was the navigation team lost"]


def main() -> None:
    url, workdir, per_device = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
    rank = int(os.environ.get("RANK", "0"))
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
        max_completion_length=12,
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
    trainer = GRPOTrainer(
        model=net, reward_funcs=[reward], args=args, train_dataset=dataset, processing_class=tok
    )
    trainer.train()
    if rank == 0:
        print(
            json.dumps(
                {
                    "global_step": trainer.state.global_step,
                    "world_size": trainer.accelerator.num_processes,
                    "log_keys": sorted({k for entry in trainer.state.log_history for k in entry}),
                    "log_history": trainer.state.log_history,
                }
            ),
            flush=True,
        )
    if dist.is_available() and dist.is_initialized():
        # torchrun: leave the process group before exit, or gloo's threads can still be
        # running at interpreter teardown ("terminate called without an active exception")
        dist.barrier()
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
