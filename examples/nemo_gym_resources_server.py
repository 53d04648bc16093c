"""NeMo Gym with Rubricate: a resources server whose `verify()` asks the gateway for the reward
and its stage components. In NeMo Gym it is served like any resources server:

    from rubricate_client.nemo_gym import RubricateResourcesServer, RubricateResourcesServerConfig
    config = RubricateResourcesServerConfig(host="0.0.0.0", port=8080, entrypoint="app.py",
                                            name="rubricate", rubricate_url="http://<gateway>:8000",
                                            group_size=8)   # rollouts per task (num_repeats)
    app = RubricateResourcesServer(config=config, server_client=...).setup_webserver()

Each task row carries a Rubricate `label` (JSON: question, question_id, rubrics, kind, ...).
This script builds that app (NeMo Gym's own: `/verify` wrapped in its `judge_failsafe`) and
posts one task's four rollouts to it concurrently, as NeMo Gym's rollout collection does;
the gateway gathers them into one group. Then a rollout the judge cannot score: NeMo Gym's
failure outcome (`mask_sample`, `judge_failed`), never a reward.
Needs NeMo Gym 0.7 (Python >= 3.13) and the client, e.g. `.venvs/nemo-gym` (`make
trainer-venvs`). Run:  .venvs/nemo-gym/bin/python examples/nemo_gym_resources_server.py --url URL
(a running gateway, e.g. `make serve`); `--fake-judge` where the server is installed too.
"""

import asyncio
import json
from typing import Any
from unittest.mock import MagicMock

import httpx
from _platform import gateway, parser
from nemo_gym.server_utils import ServerClient

from rubricate_client.nemo_gym import RubricateResourcesServer, RubricateResourcesServerConfig

QUESTION = "Why was the Mars Climate Orbiter lost?"


def trajectory(quality: str) -> str:
    return (
        f"<think>scope</think><structured_plan>plan {quality}</structured_plan>"
        f'<call_tool name="search">orbiter</call_tool><tool_output>units</tool_output>'
        f"<think>audit</think><review>ok {quality}</review>"
        f"<answer>Unit mismatch. {quality}</answer>"
    )


def verify_body(text: str, label: dict[str, Any]) -> dict[str, Any]:
    """A NeMo Gym verify request: the task's prompt, the policy's response, the label."""
    message = {"type": "output_text", "text": text, "annotations": []}
    return {
        "responses_create_params": {"input": [{"role": "user", "content": QUESTION}]},
        "response": {
            "id": "resp",
            "created_at": 0,
            "model": "policy",
            "object": "response",
            "output": [
                {
                    "type": "message",
                    "id": "msg",
                    "role": "assistant",
                    "status": "completed",
                    "content": [message],
                }
            ],
            "parallel_tool_calls": False,
            "tool_choice": "auto",
            "tools": [],
        },
        "label": json.dumps(label),
    }


async def run(url: str) -> None:
    config = RubricateResourcesServerConfig(
        host="127.0.0.1",
        port=0,
        entrypoint="app.py",
        name="rubricate",
        rubricate_url=url,
        group_size=4,
        timeout_s=60,
    )
    # NeMo Gym's app for this server (its ServerClient reaches other servers; none here)
    server = RubricateResourcesServer(config=config, server_client=MagicMock(spec=ServerClient))
    app = server.setup_webserver()
    label = {"question": QUESTION, "question_id": "mco-nemo"}
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://nemo-gym", timeout=120
    ) as c:
        qualities = ["[[excellent]]", "", "[[poor]]", "[[fail-stagewise]]"]
        answers = await asyncio.gather(
            *(c.post("/verify", json=verify_body(trajectory(q), label)) for q in qualities)
        )
        for q, answer in zip(qualities, answers, strict=True):
            out = answer.json()
            components = {k: round(v, 3) for k, v in out["reward_components"].items()}
            print(
                f"{q or '(plain)':20} reward {out['reward']}  components {components}"
                f"  unscored {out['unscored_components']}"
            )
        # a group of its own (group_size 1) that the judge cannot score
        failing = {**label, "question_id": "mco-nemo-fail", "group_size": 1}
        out = (
            await c.post("/verify", json=verify_body(trajectory("[[fail-all]]"), failing))
        ).json()
        print(
            f"{'[[fail-all]]':20} mask_sample {out['mask_sample']}  "
            f"failure_kind {out['failure_kind']}  reward_components {out.get('reward_components')}"
        )


def main() -> None:
    args = parser(__doc__ or "").parse_args()
    with gateway(args) as urls:
        asyncio.run(run(urls["http"]))


if __name__ == "__main__":
    main()
