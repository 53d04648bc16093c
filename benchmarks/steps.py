"""Step-level benchmark. Prints figures; asserts nothing.

1. Verify latency per step: `/v1/steps/verify` on each step of a sample trajectory against a
   fixed 3-criterion rubric (one verifier call per step): wall time per call, tokens.
2. Listwise-reward throughput: `/v1/rubrics/listwise-reward` for G rubrics over a slate of
   candidates (one verifier call per rubric and candidate): rubrics scored per minute.

Runs against the embedded model (real CPU inference) by default; `--fake` uses an instant
fake judge instead, which measures the platform's own overhead.

    python benchmarks/steps.py [--steps 2] [--rubrics 2] [--candidates 4] [--fake]
"""

import argparse
import asyncio
import json
import re
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from rubricate.embedded import SERVICES, EmbeddedPlatform
from rubricate.llm.base import GenerationParams, LLMBackend
from rubricate.testing.fake_judge import FakeJudgeBackend

QUESTION = "Why was NASA's Mars Climate Orbiter lost in 1999?"
STEPS = [
    '<call_tool name="google_search">Mars Climate Orbiter loss cause</call_tool>',
    '<call_tool name="browse">https://en.wikipedia.org/wiki/Mars_Climate_Orbiter</call_tool>',
    '<call_tool name="google_search">Mars Climate Orbiter investigation board report '
    "pound-force seconds newton seconds</call_tool>",
    '<call_tool name="google_search">Lockheed Martin ground software units SM_FORCES</call_tool>',
]
OBSERVATION = "<tool_output>Search results about the orbiter's loss.</tool_output>\n"
RUBRIC = {
    "criteria": [
        {"text": "Targets the official cause of the spacecraft's loss", "weight": 3},
        {"text": "Names the Mars Climate Orbiter explicitly", "weight": 2},
        {"text": "Looks for the investigation board's findings", "weight": 1},
    ]
}
CANDIDATES = [
    STEPS[2],
    '<call_tool name="google_search">Mars Climate Orbiter</call_tool>',
    '<call_tool name="google_search">NASA missions 1999</call_tool>',
    '<call_tool name="google_search">best pizza in Naples</call_tool>',
    '<call_tool name="browse">https://mars.nasa.gov/msp98/orbiter/</call_tool>',
    '<call_tool name="google_search">orbiter trajectory correction maneuvers</call_tool>',
]
RUBRIC_TEXTS = [
    json.dumps(
        {"criteria": [{"criterion": c["text"], "weight": c["weight"]} for c in RUBRIC["criteria"]]}
    ),
    json.dumps(
        {
            "criteria": [
                {"criterion": "Searches for the unit mismatch", "weight": 2},
                {"criterion": "Uses the investigation report as the source", "weight": 1},
            ]
        }
    ),
]


def _fake_backend() -> LLMBackend:
    def verdicts(user: str, params: GenerationParams) -> str:
        found = re.search(r"exactly (\d+) items", user)
        n = int(found.group(1)) if found else 1
        items = [{"index": i, "meets": i % 2 == 1} for i in range(1, n + 1)]
        return json.dumps({"verdicts": items})

    return FakeJudgeBackend(handlers={"step_verdicts": verdicts})


async def run(args: argparse.Namespace) -> None:
    backend = _fake_backend() if args.fake else None
    label = "fake judge (instant)" if args.fake else "embedded model (CPU)"
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        platform = EmbeddedPlatform(
            data_dir=Path(tmp), ports=dict.fromkeys(SERVICES, 0), backend=backend
        )
        async with (
            platform,
            httpx.AsyncClient(base_url=platform.urls["gateway"], timeout=3600) as client,
        ):
            print(f"== step benchmark against the {label} ==", flush=True)
            print(f"start-up (model load)        {time.perf_counter() - t0:8.1f} s", flush=True)
            await verify_latency(client, steps=args.steps)
            await listwise_throughput(client, rubrics=args.rubrics, candidates=args.candidates)


async def verify_latency(client: httpx.AsyncClient, *, steps: int) -> None:
    history = ""
    walls: list[float] = []
    completion = prompt = 0
    for i in range(steps):
        action = STEPS[i % len(STEPS)]
        body: dict[str, Any] = {
            "question": QUESTION,
            "history": history,
            "action": action,
            "rubric": RUBRIC,
        }
        t = time.perf_counter()
        response = await client.post("/v1/steps/verify", json=body)
        walls.append(time.perf_counter() - t)
        if response.status_code != 200:
            print(f"verify failed: HTTP {response.status_code} {response.text[:300]}")
            return
        out = response.json()
        prompt += out["usage"]["prompt_tokens"]
        completion += out["usage"]["completion_tokens"]
        print(
            f"  step {i}: {walls[-1]:6.2f} s  score {out['score']:.2f}  pass {out['pass']}",
            flush=True,
        )
        history += action + OBSERVATION
    print(f"verify latency per step      {statistics.median(walls):8.2f} s (median of {steps})")
    print(f"                             {min(walls):8.2f} s min, {max(walls):.2f} s max")
    per_prompt, per_completion = prompt / steps, completion / steps
    print(f"tokens per step              {per_prompt:8.0f} prompt, {per_completion:.0f} completion")


async def listwise_throughput(client: httpx.AsyncClient, *, rubrics: int, candidates: int) -> None:
    body = {
        "question": QUESTION,
        "history": STEPS[0] + OBSERVATION,
        "candidates": CANDIDATES[:candidates],
        "expert_ranking": list(range(candidates)),
        "rubrics": [RUBRIC_TEXTS[i % len(RUBRIC_TEXTS)] for i in range(rubrics)],
    }
    t = time.perf_counter()
    response = await client.post("/v1/rubrics/listwise-reward", json=body)
    wall = time.perf_counter() - t
    if response.status_code != 200:
        print(f"listwise-reward failed: HTTP {response.status_code} {response.text[:300]}")
        return
    out = response.json()
    calls = out["usage"]["calls"]
    print(f"listwise reward: {rubrics} rubrics x {candidates} candidates, {calls} verifier calls")
    for r in out["rubrics"]:
        print(f"  rubric {r['index']}: rho {r['rho']}, reward {r['reward']}, status {r['status']}")
    print(f"wall time                    {wall:8.2f} s")
    print(f"rubrics scored per minute    {rubrics / wall * 60:8.2f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=2, help="verify calls (one per step)")
    parser.add_argument("--rubrics", type=int, default=2, help="G: rubrics in the group")
    parser.add_argument("--candidates", type=int, default=4, choices=range(2, len(CANDIDATES) + 1))
    parser.add_argument("--fake", action="store_true", help="instant fake judge, no model")
    args = parser.parse_args()
    asyncio.run(run(args))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
