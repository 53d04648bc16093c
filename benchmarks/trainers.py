"""Trainer arrival patterns on `/get_reward`: 8 stagewise samples of one question sent one per
request, concurrently (OpenRLHF's pattern; the label carries `group_size: 8`, so the gateway
assembles them into one group), and the same 8 sent at once in one request. Prints, for each:
requests, judge calls (rubric generation, scoring), wall time, and the ratio of the two wall
times (goal: at most 1.2). Prints figures; asserts nothing.

Default: the embedded platform with the fake judge, each judge call delayed by
`--judge-delay-s` (a model's latency; the fake judges nothing). `--real-model`: the embedded
model (CPU, minutes); run it under the model lock:

    python benchmarks/trainers.py [--judge-delay-s 1.0]
    flock /tmp/rubricate-model.lock python benchmarks/trainers.py --real-model
"""

import argparse
import asyncio
import json
import os
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import httpx

from rubricate.embedded import SERVICES, EmbeddedPlatform
from rubricate.llm.base import ChoiceScores, Completion, GenerationParams, LLMBackend, Message
from rubricate.llm.factory import build_backend
from rubricate.llm.settings import LLMSettings
from rubricate.testing.fake_judge import FakeJudgeBackend

SAMPLES = 8


class CountingBackend(LLMBackend):
    """Counts the judge calls of another backend, by task."""

    def __init__(self, inner: LLMBackend) -> None:
        self.inner = inner
        self.name = inner.name
        self.model = inner.model
        self.supports_choice_scoring = inner.supports_choice_scoring
        self.supports_reply_prefix = inner.supports_reply_prefix
        self.calls: Counter[str] = Counter()

    async def complete(self, messages: Sequence[Message], params: GenerationParams) -> Completion:
        self.calls[params.schema_name] += 1
        return await self.inner.complete(messages, params)

    async def score_choices(
        self, messages: Sequence[Message], *, reply_prefix: str, choices: Sequence[str]
    ) -> ChoiceScores:
        self.calls["choices"] += 1
        return await self.inner.score_choices(messages, reply_prefix=reply_prefix, choices=choices)

    async def choice_scoring_problem(self) -> str | None:
        return await self.inner.choice_scoring_problem()

    async def ready(self) -> bool:
        return await self.inner.ready()

    async def aclose(self) -> None:
        await self.inner.aclose()


def example() -> tuple[str, list[str]]:
    """The demo's question and 8 of its trajectories (repeated, each made distinct)."""
    text = resources.files("rubricate.examples").joinpath("stagewise_group.json").read_text()
    group: dict[str, Any] = json.loads(text)
    base = [r["trajectory"] for r in group["rollouts"]]
    return group["question"], [
        base[i % len(base)] + f"\n<!-- sample {i} -->" for i in range(SAMPLES)
    ]


def body(question: str, question_id: str, responses: Sequence[str], **label: Any) -> dict[str, Any]:
    labels = [{"question": question, "question_id": question_id, **label}] * len(responses)
    return {"query": list(responses), "labels": labels}


async def run(backend: CountingBackend, *, delay_note: str) -> None:
    question, responses = example()
    with tempfile.TemporaryDirectory() as tmp:
        async with (
            EmbeddedPlatform(
                data_dir=Path(tmp), ports=dict.fromkeys(SERVICES, 0), backend=backend
            ) as platform,
            httpx.AsyncClient(base_url=platform.urls["gateway"], timeout=3600) as client,
        ):
            rows = []
            for pattern in ("one per request", "all at once"):
                backend.calls.clear()
                t0 = time.perf_counter()
                if pattern == "one per request":
                    replies = await asyncio.gather(
                        *(
                            client.post(
                                "/get_reward",
                                json=body(question, "bench-split", [r], group_size=SAMPLES),
                            )
                            for r in responses
                        )
                    )
                else:
                    replies = [
                        await client.post(
                            "/get_reward", json=body(question, "bench-batch", responses)
                        )
                    ]
                wall = time.perf_counter() - t0
                failed = [r for r in replies if r.status_code != 200]
                if failed:
                    print(f"{pattern}: HTTP {failed[0].status_code} {failed[0].text[:300]}")
                    return
                sizes = {s for r in replies for s in r.json()["extra_logs"]["rubricate/group_size"]}
                rows.append((pattern, len(replies), dict(backend.calls), wall, sizes))
    print(f"== {SAMPLES} stagewise samples of one question, {delay_note} ==")
    print(f"{'pattern':18} {'requests':>8} {'judge calls':>34} {'wall':>9}  group sizes scored")
    for pattern, requests, calls, wall, sizes in rows:
        shown = ", ".join(f"{k} {v}" for k, v in sorted(calls.items()))
        print(f"{pattern:18} {requests:8d} {shown:>34} {wall:8.2f}s  {sorted(sizes)}")
    ratio = rows[0][3] / rows[1][3]
    print(f"wall-time ratio (one per request / all at once): {ratio:.2f} (goal <= 1.2)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--judge-delay-s", type=float, default=1.0)
    parser.add_argument(
        "--real-model",
        action="store_true",
        help="the embedded model instead of the fake judge (run under the model flock)",
    )
    args = parser.parse_args()
    # the reward audit re-judges each question's first group in the background, on the same
    # model in embedded mode: its calls would land in whichever pattern runs next
    os.environ.setdefault("RUBRICATE_AUDIT_ENABLED", "false")
    if args.real_model:
        inner = build_backend(LLMSettings())
        note = f"embedded model ({inner.model})"
    else:
        inner = FakeJudgeBackend(delay_s=args.judge_delay_s)
        note = f"fake judge, {args.judge_delay_s:g} s per call"
    asyncio.run(run(CountingBackend(inner), delay_note=note))


if __name__ == "__main__":
    main()
