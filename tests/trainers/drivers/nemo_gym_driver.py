"""NeMo Gym 0.7 driver (run in .venvs/nemo-gym, Python 3.13): Rubricate's resources server,
served by NeMo Gym's own `SimpleResourcesServer.setup_webserver` (its `/verify` route wrapped
in NeMo Gym's `judge_failsafe`), verifies the N rollouts of one task, one `/verify` call each,
sent concurrently as NeMo Gym's rollout collection sends a task's repeats, against a running
gateway, which gathers them into one group (`group_size` N); then one rollout the judge cannot
score (its label's `group_size` 1: a group of its own), and one rollout while the gateway is
unreachable.

The calls must be concurrent: with `group_size` N, a `/verify` waits in the gateway until its
group holds N rollouts, so a loop that awaits each call before sending the next waits the
gateway's gather window (`RUBRICATE_GATEWAY_GROUP_GATHER_S`, 600 s) on the first call. That
was this driver's hang before.
Prints one JSON object: the verify responses.

usage: python nemo_gym_driver.py GATEWAY_URL DEAD_URL
"""

import asyncio
import json
import sys
from unittest.mock import MagicMock

import httpx
from nemo_gym.server_utils import ServerClient
from tiny import trajectory

from rubricate_client.nemo_gym import RubricateResourcesServer, RubricateResourcesServerConfig

N = 4
QUESTION = "why was the orbiter lost"
LABEL = json.dumps({"question": QUESTION, "question_id": "nemo-q"})


def body(text: str, label: str = LABEL) -> dict:
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
                    "content": [{"type": "output_text", "text": text, "annotations": []}],
                }
            ],
            "parallel_tool_calls": False,
            "tool_choice": "auto",
            "tools": [],
        },
        "label": label,
    }


def server(url: str) -> RubricateResourcesServer:
    config = RubricateResourcesServerConfig(
        host="127.0.0.1",
        port=0,
        entrypoint="app.py",
        name="rubricate",
        rubricate_url=url,
        group_size=N,
        timeout_s=30,
    )
    return RubricateResourcesServer(config=config, server_client=MagicMock(spec=ServerClient))


async def main() -> None:
    url, dead = sys.argv[1], sys.argv[2]
    app = server(url).setup_webserver()
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://nemo", timeout=120) as c:
        group = [
            trajectory("a", "[[excellent]]"),
            trajectory("b", "[[poor]]"),
            trajectory("c"),
            trajectory("d", "[[fail-stagewise]]"),
        ]
        answers = await asyncio.wait_for(
            asyncio.gather(*(c.post("/verify", json=body(t)) for t in group)), 90
        )
        failed_label = json.dumps(
            {"question": QUESTION, "question_id": "nemo-fail", "group_size": 1}
        )
        failed = await c.post("/verify", json=body(trajectory("g", "[[fail-all]]"), failed_label))
    dead_app = server(dead).setup_webserver()
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=dead_app), base_url="http://nemo", timeout=120
    ) as c:
        unreachable = await c.post("/verify", json=body(trajectory("h")))
    print(
        json.dumps(
            {
                "status": [a.status_code for a in [*answers, failed, unreachable]],
                "group": [a.json() for a in answers],
                "failed": failed.json(),
                "unreachable": unreachable.json(),
            }
        )
    )


if __name__ == "__main__":
    asyncio.run(main())
