"""A FAKE OpenAI-compatible chat server (FastAPI), for the orchestration tests of served
choice scoring: it records every request body and answers one-token completions whose first
token's `top_logprobs` come from a rule of the test, or with no log-probabilities at all
(a server that cannot score choices). Real servers are tested in
test_served_choices_real_model.py."""

import asyncio
import math
from collections.abc import Callable, Sequence
from typing import Any

from fastapi import FastAPI, Request

PYes = Callable[[str], float]
"""p(yes) for a prompt (the last message's text)."""


class FakeOpenAIServer:
    def __init__(self, *, logprobs: bool = True, p_yes: PYes = lambda _: 0.75) -> None:
        self.logprobs = logprobs
        self.p_yes = p_yes
        self.bodies: list[dict[str, Any]] = []
        self.events: list[tuple[str, int]] = []
        """("in", n) when request n arrives, ("out", n) when its answer is ready."""
        self.app = FastAPI()
        self.app.post("/v1/chat/completions")(self._chat)
        self.app.get("/v1/models")(self._models)

    async def _models(self) -> dict[str, Any]:
        return {"object": "list", "data": [{"id": "fake-judge", "object": "model"}]}

    async def _chat(self, request: Request) -> dict[str, Any]:
        body: dict[str, Any] = await request.json()
        self.bodies.append(body)
        number = len(self.bodies) - 1
        self.events.append(("in", number))
        await asyncio.sleep(0.001)  # other requests in flight arrive meanwhile
        self.events.append(("out", number))
        prompt = body["messages"][-1]["content"]
        p = self.p_yes(prompt)
        top = [("yes", p), ("no", (1 - p) * 0.9), ("Yes", (1 - p) * 0.1)]
        choice: dict[str, Any] = {
            "index": 0,
            "message": {"role": "assistant", "content": "yes" if p >= 0.5 else "no"},
            "finish_reason": "length",
            "logprobs": None,
        }
        if self.logprobs and body.get("logprobs"):
            choice["logprobs"] = {
                "content": [
                    {
                        "token": choice["message"]["content"],
                        "logprob": math.log(max(p, 1 - p)),
                        "top_logprobs": [
                            {"token": t, "logprob": math.log(v)} for t, v in top if v > 0
                        ],
                    }
                ]
            }
        words = sum(len(m["content"].split()) for m in body["messages"])
        return {
            "id": "fake",
            "object": "chat.completion",
            "model": "fake-judge",
            "choices": [choice],
            "usage": {"prompt_tokens": words, "completion_tokens": 1, "total_tokens": words + 1},
        }

    def prompts(self) -> Sequence[str]:
        """The last message of every request, in arrival order."""
        return [b["messages"][-1]["content"] for b in self.bodies]
