"""TRL with Rubricate: the reward part of GRPO steps. With TRL installed, the same object goes
straight into the trainer:

    from trl import GRPOConfig, GRPOTrainer
    from rubricate_client.trl import RubricateReward
    trainer = GRPOTrainer(model=..., args=GRPOConfig(...), train_dataset=dataset,
                          reward_funcs=[RubricateReward("http://<gateway>:8000")])

The dataset's `prompt` column may be chat messages; a `label` column (JSON) or columns named
like label fields (question, question_id, rubrics, nuggets, kind) reach the platform. A None
reward means the platform could not score that completion; TRL leaves it out.
Run:  python examples/trl_grpo.py --fake-judge
"""

import statistics

from _platform import gateway, parser

from rubricate_client.trl import RubricateReward

QUESTION = "Why was the Mars Climate Orbiter lost?"


def completion(quality: str) -> list[dict[str, str]]:
    text = (
        f"<structured_plan>plan {quality}</structured_plan>"
        f'<call_tool name="search">orbiter</call_tool><tool_output>units</tool_output>'
        f"<think>audit</think><review>ok {quality}</review>"
        f"<answer>Unit mismatch. {quality}</answer>"
    )
    return [{"role": "assistant", "content": text}]


def main() -> None:
    args = parser(__doc__ or "").parse_args()
    with gateway(args) as urls:
        reward = RubricateReward(urls["http"])
        prompt = [{"role": "user", "content": QUESTION}]
        for step in range(2):
            qualities = ["[[excellent]]", "", "[[poor]]", "[[fail-all]]"]
            rewards = reward(
                prompts=[prompt] * len(qualities),
                completions=[completion(q) for q in qualities],
                question_id=["mco-trl"] * len(qualities),
            )
            scored = [r for r in rewards if r is not None]
            mean, spread = statistics.fmean(scored), statistics.pstdev(scored) or 1.0
            advantages = [None if r is None else round((r - mean) / spread, 3) for r in rewards]
            print(f"step {step}: rewards {rewards}  advantages {advantages}")


if __name__ == "__main__":
    main()
