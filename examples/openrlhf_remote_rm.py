"""OpenRLHF with Rubricate as its remote reward model: the request part of a training loop.

In OpenRLHF itself no code is needed; start the trainer with

    --reward.remote_url http://<gateway>:8000/get_reward   (releases before 0.9: --remote_rm_url)
    --label_key label      # a dataset column with a JSON label per prompt (see below)

and it POSTs exactly what this script posts: {"query": prompt + response, "prompts", "labels"}
for each rollout batch, then uses "rewards" (and "scores" for dynamic filtering), logging
"extra_logs". Run:  python examples/openrlhf_remote_rm.py --fake-judge
"""

import json
import statistics

import httpx
from _platform import gateway, parser

QUESTION = "Why was the Mars Climate Orbiter lost?"
PROMPT = f"<|im_start|>user\n{QUESTION}<|im_end|>\n<|im_start|>assistant\n"
LABEL = json.dumps(
    {
        "question": QUESTION,
        "question_id": "mco-loss",
        "rubrics": [
            {
                "title": "Names the unit mismatch",
                "description": "pound-force vs newton",
                "weight": 3,
            }
        ],
    }
)


def rollout(quality: str) -> str:
    """A stand-in for the policy's sampled response (a Plan/Research/Review/Answer trace)."""
    return (
        f"<think>scope {quality}</think><structured_plan>find the cause</structured_plan>"
        f'\n<call_tool name="search">mars climate orbiter loss</call_tool>'
        f"<tool_output>navigation error</tool_output>"
        f"\n<think>audit</think><review>sources agree {quality}</review>"
        f"\n<answer>A unit mismatch: pound-force seconds vs newton seconds. {quality}</answer>"
    )


def main() -> None:
    args = parser(__doc__ or "").parse_args()
    with gateway(args) as urls, httpx.Client(timeout=900) as http:
        for step in range(2):
            responses = [rollout(q) for q in ("[[excellent]]", "", "[[poor]]", "")]
            batch = {
                "query": [PROMPT + r for r in responses],
                "prompts": [PROMPT] * len(responses),
                "labels": [LABEL] * len(responses),
            }
            reply = http.post(f"{urls['http']}/get_reward", json=batch)
            reply.raise_for_status()
            out = reply.json()
            rewards = out["rewards"]  # None: the judge could not score that sample
            scored = [r for r in rewards if r is not None]
            mean = statistics.fmean(scored) if scored else 0.0
            spread = (statistics.pstdev(scored) if len(scored) > 1 else 0.0) or 1.0
            # what GRPO would do; an unscored sample gets no advantage (left out, not 0 reward)
            advantages = [0.0 if r is None else (r - mean) / spread for r in rewards]
            print(f"step {step}: rewards {rewards}")
            print(f"         advantages {[round(a, 3) for a in advantages]}")
            print(f"         scored {out['extra_logs']['rubricate/scored']}")


if __name__ == "__main__":
    main()
