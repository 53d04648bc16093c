"""veRL with Rubricate: the reward calls of a training step, as veRL's reward managers make them.

In veRL's trainer config (no code of your own):

    custom_reward_function:
      path: /path/to/site-packages/rubricate_client/verl.py
      name: compute_score            # per-sample manager (naive): a scalar R_answer
      reward_kwargs:
        url: http://<gateway>:8000
        kind: stagewise

For stage credit (SS-GRPO per token, in veRL's streamed default path too), use the reward
manager and estimator instead, with VERL_USE_EXTERNAL_MODULES=rubricate_client.verl_manager
in every veRL process (docs/integrations/verl.md):

    reward:
      reward_manager: {source: register, name: rubricate}
    algorithm: {adv_estimator: rubricate_ssgrpo, use_kl_in_reward: false}

The question comes from the label (ground_truth as JSON) or extra_info["question"]: veRL does
not pass the prompt to a reward function. Run:  python examples/verl_reward.py --fake-judge
"""

import json

from _platform import gateway, parser

from rubricate_client.verl import compute_score, compute_score_batch

QUESTION = "Why was the Mars Climate Orbiter lost?"


def solution(quality: str) -> str:
    return (
        f"<structured_plan>find the cause {quality}</structured_plan>"
        f'<call_tool name="search">orbiter loss</call_tool><tool_output>units</tool_output>'
        f"<think>audit</think><review>checked {quality}</review>"
        f"<answer>A pound-force vs newton unit mismatch. {quality}</answer>"
    )


def main() -> None:
    args = parser(__doc__ or "").parse_args()
    ground_truth = json.dumps({"question": QUESTION, "question_id": "mco-verl"})
    with gateway(args) as urls:
        one = compute_score("mco", solution("[[excellent]]"), ground_truth, url=urls["http"])
        print("compute_score ->", one)
        batch = compute_score_batch(
            data_sources=["mco"] * 3,
            solution_strs=[solution(q) for q in ("[[excellent]]", "", "[[poor]]")],
            ground_truths=[None] * 3,
            extra_infos=[{"question": QUESTION, "question_id": "mco-verl"}] * 3,
            url=urls["http"],
        )
        print("compute_score_batch scores ->", [r["score"] for r in batch])


if __name__ == "__main__":
    main()
