"""verifiers 0.4 driver (run in .venvs/verifiers): Rubricate's judge plugged into a task's
config (`TaskConfig.judges`, id `rubricate_judge`, resolved by verifiers' own plugin loader)
and run by verifiers' `Task.score` for the N rollouts of one example, concurrently (as
verifiers runs an example's rollouts), against a running gateway that gathers them into one
group (`group_size` N); then one rollout the judge cannot score (its label's `group_size` 1)
and one while the gateway is unreachable. Each rollout is scored the way verifiers'
`Rollout` scores it: `Task.score` inside verifiers' `boundary(TaskError, "scoring")`, an
error recorded with `Trace.record_error` as the rollout's failure.
Prints one JSON object: per trace its ok flag, stop condition, rewards, reward and metrics.

usage: python verifiers_driver.py GATEWAY_URL DEAD_URL
"""

import asyncio
import json
import sys
from typing import Any

import verifiers.v1 as vf
from tiny import trajectory
from verifiers.v1.errors import TaskError, boundary

N = 4
QUESTION = "why was the orbiter lost"


class RubricateData(vf.TaskData):  # type: ignore[misc]
    label: str | None = None


def task(url: str) -> vf.Task:
    config = vf.TaskConfig(
        judges=[{"id": "rubricate_judge", "rubricate_url": url, "group_size": N, "timeout_s": 30}]
    )
    label = json.dumps({"question": QUESTION, "question_id": "vf-q"})
    return vf.Task(RubricateData(prompt=QUESTION, label=label), config)


def trace_of(t: vf.Task, reply: str) -> vf.Trace:
    trace = vf.Trace(
        task=vf.TraceTask(type="Task", data=t.data), agent=vf.AgentInfo(config=vf.AgentConfig())
    )
    trace.root_reply = reply
    return trace


async def scored(t: vf.Task, trace: vf.Trace) -> dict[str, Any]:
    try:
        async with boundary(TaskError, "scoring"):
            await t.score(trace)
        trace.ok = True
    except Exception as exc:  # verifiers' Rollout records every failure
        trace.record_error(exc)
    return {
        "ok": trace.ok,
        "stop_condition": trace.stop_condition,
        "rewards": {k: None if r is None else r.model_dump() for k, r in trace.rewards.items()},
        "reward": trace.reward,
        "metrics": trace.metrics,
        "errors": [e.message for e in trace.errors],
    }


async def main() -> None:
    url, dead = sys.argv[1], sys.argv[2]
    t = task(url)
    group = [
        trajectory("a", "[[excellent]]"),
        trajectory("b", "[[poor]]"),
        trajectory("c"),
        trajectory("d", "[[fail-stagewise]]"),
    ]
    out = await asyncio.wait_for(
        asyncio.gather(*(scored(t, trace_of(t, reply)) for reply in group)), 90
    )
    failing = t.with_data(
        label=json.dumps({"question": QUESTION, "question_id": "vf-fail", "group_size": 1})
    )
    failed = await scored(failing, trace_of(failing, trajectory("g", "[[fail-all]]")))
    unreachable_task = task(dead)
    unreachable = await scored(unreachable_task, trace_of(unreachable_task, trajectory("h")))
    print(json.dumps({"group": out, "failed": failed, "unreachable": unreachable}))


if __name__ == "__main__":
    asyncio.run(main())
