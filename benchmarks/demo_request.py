"""The demo's request on the embedded model, call by call (issue 35).

Starts the embedded platform as `make demo` does (judge cache in memory, cold), sends the
bundled group (or `--group FILE`) once, and prints every model call the request made: its
kind (generate or choices), prompt tokens, tokens reused from the KV cache, new tokens,
completion tokens and seconds; then the totals, the rubrics generated (with their
descriptions) and the demo's A_answer ordering check (thorough > no-review > shallow >
wrong). Figures in docs/benchmarks.md ("The demo's request").

    .venv/bin/python benchmarks/demo_request.py            # the bundled demo group
    .venv/bin/python benchmarks/demo_request.py --runs 2   # twice, a fresh platform each
"""

import argparse
import asyncio
import itertools
import json
import logging
import re
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from rubricate.demo import load_example
from rubricate.embedded import EmbeddedPlatform
from rubricate_client.constants import STAGES
from rubricate_client.endpoints import STAGEWISE_SCORE

_CALL = re.compile(
    r"embedded\.call kind=(?P<kind>\w+) prompt=(?P<prompt>\d+) reused=(?P<reused>\d+)"
    r"(?: completion=(?P<completion>\S+))? seconds=(?P<seconds>[\d.]+)"
)
ORDER = ("thorough", "no-review", "shallow", "wrong")
"""The demo group's expected ordering on A_answer."""


class _Calls(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.calls: list[dict[str, Any]] = []

    def emit(self, record: logging.LogRecord) -> None:
        match = _CALL.search(record.getMessage())
        if match:
            call: dict[str, Any] = match.groupdict()
            call["at"] = time.perf_counter()
            self.calls.append(call)


async def one_run(group: dict[str, Any]) -> dict[str, Any]:
    calls = _Calls()
    embedded = logging.getLogger("rubricate.llm.embedded")
    embedded.addHandler(calls)
    embedded.setLevel(logging.DEBUG)
    try:
        with tempfile.TemporaryDirectory(prefix="rubricate-demo-bench-") as tmp:
            platform = EmbeddedPlatform(
                data_dir=Path(tmp),
                ports=dict.fromkeys(("gateway", "rubric-generator", "verifier", "store"), 0),
            )
            await platform.start()
            try:
                async with httpx.AsyncClient(
                    base_url=platform.urls["gateway"], timeout=3600
                ) as client:
                    started = time.perf_counter()
                    response = await client.post(STAGEWISE_SCORE.path, json=group)
                    wall = time.perf_counter() - started
                    response.raise_for_status()
                    body = response.json()
                    request_calls = [c for c in calls.calls if c["at"] <= started + wall]
            finally:
                await platform.stop()
    finally:
        embedded.removeHandler(calls)
    return {"wall_s": wall, "body": body, "calls": request_calls}


def report(run: dict[str, Any]) -> bool:
    calls, body = run["calls"], run["body"]
    print(f"{'kind':9} {'prompt':>6} {'reused':>6} {'new':>5} {'compl':>5} {'s':>6}")
    new_total = completion_total = 0
    seconds: dict[str, float] = {}
    for c in calls:
        new = int(c["prompt"]) - int(c["reused"])
        completion = int(c["completion"]) if c["completion"] not in (None, "None") else 0
        new_total += new
        completion_total += completion
        seconds[c["kind"]] = seconds.get(c["kind"], 0.0) + float(c["seconds"])
        if c["kind"] != "choices" or new > 60:
            print(
                f"{c['kind']:9} {c['prompt']:>6} {c['reused']:>6} {new:>5} {completion:>5} "
                f"{float(c['seconds']):6.1f}"
            )
    n_choices = sum(1 for c in calls if c["kind"] == "choices")
    print(f"(choices passes with at most 60 new tokens not listed: {n_choices} passes in all)")
    print(
        f"calls {len(calls)}, new prompt tokens {new_total}, completion tokens "
        f"{completion_total}, model seconds "
        + ", ".join(f"{k} {v:.1f}" for k, v in sorted(seconds.items()))
    )
    print(f"request wall {run['wall_s']:.1f} s")
    print("rubrics after generation:")
    for stage in STAGES:
        for rb in body["rubrics"][stage]:
            sign = "+" if rb["polarity"] == "positive" else "-"
            print(
                f"  {stage:8} {rb['origin'][:4]} {sign}{rb['weight']} {rb['title']}: "
                f"{rb['description']}"
            )
    titles = {rb["id"]: rb["title"] for s in STAGES for rb in body["rubrics"][s]}
    print("judgments (expected score 0..2, or the score; * refused):")
    for r in body["rollouts"]:
        cells = [
            f"{titles.get(j['rubric_id'], '?')[:28]}="
            f"{j['expected_score'] if j.get('expected_score') is not None else j['score']:.2f}"
            + ("*" if j.get("refused") else "")
            for j in r["judgments"]
        ]
        print(f"  {r['id']:10} " + "; ".join(cells))
    answer = {r["id"]: (r["scores"] or {}).get("answer") for r in body["rollouts"]}
    adv = {r["id"]: (r["advantages"] or {}).get("answer") for r in body["rollouts"]}
    print("R_answer " + json.dumps(answer) + "\nA_answer " + json.dumps(adv))
    present = [k for k in ORDER if adv.get(k) is not None]
    holds = len(present) == len(ORDER) and all(
        adv[a] > adv[b] for a, b in itertools.pairwise(present)
    )
    print(f"A_answer ordering {' > '.join(ORDER)}: {'holds' if holds else 'does NOT hold'}")
    return holds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--group", type=Path, help="a stagewise request body (JSON)")
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    group = json.loads(args.group.read_text()) if args.group else load_example()
    for n in range(args.runs):
        print(f"== run {n + 1}")
        report(asyncio.run(one_run(group)))


if __name__ == "__main__":
    main()
