"""TRL with Rubricate: the reward part of GRPO steps. With TRL installed, the same object goes
straight into the trainer:

    from trl import GRPOConfig, GRPOTrainer
    from rubricate_client.trl import RubricateReward
    trainer = GRPOTrainer(model=..., args=GRPOConfig(...), train_dataset=dataset,
                          reward_funcs=[RubricateReward("http://<gateway>:8000")])

TRL's asynchronous trainer takes the same object (its rollout worker calls it once per whole
group, in its own process; the policy trains on R_answer, docs/integrations/trl.md):

    from trl.experimental.async_grpo import AsyncGRPOConfig, AsyncGRPOTrainer
    trainer = AsyncGRPOTrainer(model="<model id>", args=AsyncGRPOConfig(num_generations=G, ...),
                               train_dataset=dataset,
                               reward_funcs=[RubricateReward(url, group_size=G)])

For stage credit (SS-GRPO advantages on each stage's tokens), use the trainer subclass:

    from rubricate_client.trl import RubricateReward, StagewiseGRPOTrainer
    trainer = StagewiseGRPOTrainer(model=..., args=GRPOConfig(num_generations=G, ...),
                                   train_dataset=dataset, stage_credit=True,
                                   reward_funcs=[RubricateReward(url, group_size=G)])

The dataset's `prompt` column may be chat messages; a `label` column (JSON) or columns named
like label fields (question, question_id, rubrics, nuggets, kind) reach the platform. A None
reward means the platform could not score that completion; TRL leaves it out. The script
prints, per step, TRL's GRPO advantages and the per-stage advantages StagewiseGRPOTrainer
would put on each stage's tokens (here one token per character).
Run:  python examples/trl_grpo.py --fake-judge
"""

import statistics

from _platform import gateway, parser

from rubricate_client.constants import STAGES
from rubricate_client.stagecredit import StageCredit, credit_row, group_advantages, stage_ends
from rubricate_client.stages import stage_spans
from rubricate_client.tokens import token_ranges
from rubricate_client.trl import RubricateReward, text_of

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
            response = reward.last_response
            assert response is not None
            rows = []
            for i, q in enumerate(qualities):
                text = text_of(completion(q))
                chars = [(c, c + 1) for c in range(len(text))]  # one token per character
                spans = {str(s): span for s, span in stage_spans(text).items()}
                ends = stage_ends(token_ranges(chars, spans))
                logs = {k[len("rubricate/") :]: v[i] for k, v in response.extra_logs.items()}
                rows.append(credit_row(logs, ends, scored_reward=rewards[i]))
            per_stage = group_advantages(rows, lam=StageCredit.from_env().lam)
            for q, adv in zip(qualities, per_stage, strict=True):
                shown = {
                    s: None if a is None else round(a, 3) for s, a in zip(STAGES, adv, strict=True)
                }
                print(f"    {q or '(plain)':16} SS-GRPO A_k {shown}")


if __name__ == "__main__":
    main()
