"""NeMo Gym 0.7 driver (run in .venvs/nemo-gym, Python 3.13): Rubricate's resources server,
served by NeMo Gym's own `SimpleResourcesServer.setup_webserver` (its `/verify` route wrapped
in NeMo Gym's `judge_failsafe`), verifies N rollouts of one task, one `/verify` call each,
against a running gateway (each scored as its own group: see `group_size` below); then one
rollout the judge cannot score.
Prints one JSON object: the verify responses.

usage: python nemo_gym_driver.py GATEWAY_URL
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


async def main() -> None:
    url = sys.argv[1]
    config = RubricateResourcesServerConfig(
        host="127.0.0.1",
        port=0,
        entrypoint="app.py",
        name="rubricate",
        rubricate_url=url,
        group_size=N,
    )
    server = RubricateResourcesServer(config=config, server_client=MagicMock(spec=ServerClient))
    app = server.setup_webserver()
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://nemo", timeout=120) as c:
        group = [
            trajectory("a", "[[excellent]]"),
            trajectory("b", "[[poor]]"),
            trajectory("c"),
            trajectory("d", "[[fail-stagewise]]"),
        ]
        answers = [await c.post("/verify", json=body(t)) for t in group]
        failed_label = json.dumps({"question": QUESTION, "question_id": "nemo-fail"})
        failed = await c.post("/verify", json=body(trajectory("g", "[[fail-all]]"), failed_label))
    print(
        json.dumps(
            {
                "status": [a.status_code for a in answers] + [failed.status_code],
                "group": [a.json() for a in answers],
                "failed": failed.json(),
            }
        )
    )


if __name__ == "__main__":
    asyncio.run(main())
