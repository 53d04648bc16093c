"""OpenRLHF 0.11.2 driver (run in .venvs/openrlhf): its own single-turn agent executor
fetches the reward of each sample on its own, all samples at once as its rollout does, in URL
mode (`--reward.remote_url http://.../get_reward`) or reward-function mode (a .py file holding
`rubricate_client.openrlhf.reward_func`). Prints one JSON object.

usage: python openrlhf_driver.py url|func GATEWAY_URL|REWARD_URL WORKDIR
"""

import asyncio
import json
import logging
import sys
from pathlib import Path

from openrlhf.utils.agent import SingleTurnAgentExecutor

N = 4
PROMPTS = {"q-mco": "why was the orbiter lost", "q-nav": "why was the navigation team lost"}


def trajectory(marker: str) -> str:
    return (
        f"<think>plan</think><structured_plan>plan {marker}</structured_plan>"
        f'<call_tool name="search">q {marker}</call_tool><tool_output>o</tool_output>'
        f"<think>audit</think><review>gaps {marker}</review><answer>final {marker} </answer>"
    )


class Captured(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


async def main() -> None:
    mode, url, workdir = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    captured = Captured()
    logging.getLogger("rubricate_client").addHandler(captured)
    if mode == "func":
        endpoint = workdir / "rubricate_reward.py"
        endpoint.write_text("from rubricate_client.openrlhf import reward_func  # noqa: F401\n")
        executor = SingleTurnAgentExecutor(str(endpoint))
        fetch = executor._fetch_rewards_via_func
    else:
        # a full reward URL as given (e.g. one carrying a scoped token), else the gateway's
        executor = SingleTurnAgentExecutor(
            url if url.endswith("/get_reward") else f"{url}/get_reward"
        )
        fetch = executor._fetch_rewards_via_http
    samples = []
    for g, (qid, prompt) in enumerate(PROMPTS.items()):
        label = {"question_id": qid, "kind": "stagewise"}
        if mode == "url":
            label["group_size"] = N  # URL mode carries nothing but the label
        for i in range(N):
            samples.append((prompt, prompt + trajectory("abcdefgh"[g * N + i]), json.dumps(label)))
    results = await asyncio.gather(*(fetch([q], [p], [lab]) for p, q, lab in samples))
    out = []
    for result in results:
        info = result[0]
        rewards = info["rewards"]
        logs = info["extra_logs"]
        out.append(
            {
                "reward": float(rewards[0]),
                "group_size": float(logs["rubricate/group_size"][0]),
                "partial_group": float(logs["rubricate/partial_group"][0]),
            }
        )
    print(json.dumps({"samples": out, "log_lines": captured.lines}))


if __name__ == "__main__":
    asyncio.run(main())
