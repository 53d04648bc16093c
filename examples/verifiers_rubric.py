"""verifiers with Rubricate: a judge in a task's config, scored by the gateway. verifiers
resolves a judge plugin by `id` to a top-level module that exports one `Judge` subclass in
`__all__`; this file is such a module (its id is `verifiers_rubric`), and so is the one-line
module you would keep on your path:

    from rubricate_client.verifiers_judge import RubricateJudge
    __all__ = ["RubricateJudge"]

with the task config's entry `{"id": "<that module>", "rubricate_url": "http://<gateway>:8000",
"group_size": 8}` (rollouts per example). The task's `label` field carries the Rubricate
label (JSON: question, question_id, rubrics, kind, ...).
Run as a script, it scores one example's four rollouts with verifiers' own `Task.score`,
concurrently (as verifiers runs an example's rollouts; the gateway gathers them into one
group), and prints each reward with the stage components recorded as trace metrics. Then a
rollout the judge cannot score: the rollout fails (`task_error`, its reward None), never 0.
Needs verifiers 0.4 and the client, e.g. `.venvs/verifiers` (`make trainer-venvs`). Run:
.venvs/verifiers/bin/python examples/verifiers_rubric.py --url URL (a running gateway, e.g.
`make serve`); `--fake-judge` where the server is installed too.
"""

import asyncio
import json

from rubricate_client.verifiers_judge import RubricateJudge

__all__ = ["RubricateJudge"]

QUESTION = "Why was the Mars Climate Orbiter lost?"


def trajectory(quality: str) -> str:
    return (
        f"<think>scope</think><structured_plan>plan {quality}</structured_plan>"
        f'<call_tool name="search">orbiter</call_tool><tool_output>units</tool_output>'
        f"<think>audit</think><review>ok {quality}</review>"
        f"<answer>Unit mismatch. {quality}</answer>"
    )


async def run(url: str) -> None:
    import verifiers.v1 as vf
    from verifiers.v1.errors import TaskError, boundary

    class LabelledData(vf.TaskData):  # type: ignore[misc]
        label: str | None = None

    def task(label: dict[str, object]) -> vf.Task:
        judge = {"id": "verifiers_rubric", "rubricate_url": url, "group_size": label.pop("n")}
        data = LabelledData(prompt=QUESTION, label=json.dumps(label))
        return vf.Task(data, vf.TaskConfig(judges=[judge]))

    async def score(t: vf.Task, reply: str) -> vf.Trace:
        """What verifiers' Rollout does after a rollout: `Task.score` inside its scoring
        boundary, a failure recorded on the trace."""
        trace = vf.Trace(
            task=vf.TraceTask(type="Task", data=t.data),
            agent=vf.AgentInfo(config=vf.AgentConfig()),
        )
        trace.root_reply = reply
        try:
            async with boundary(TaskError, "scoring"):
                await t.score(trace)
            trace.ok = True
        except Exception as exc:
            trace.record_error(exc)
        return trace

    example = task({"question": QUESTION, "question_id": "mco-vf", "n": 4})
    qualities = ["[[excellent]]", "", "[[poor]]", "[[fail-stagewise]]"]
    traces = await asyncio.gather(*(score(example, trajectory(q)) for q in qualities))
    for q, trace in zip(qualities, traces, strict=True):
        stages = {
            k.removeprefix("rubricate/"): v
            for k, v in trace.metrics.items()
            if k.startswith("rubricate/R_")
        }
        reward = trace.rewards["rubricate"]
        print(f"{q or '(plain)':20} reward {reward.score if reward else None}  metrics {stages}")
    # a group of its own (group_size 1) that the judge cannot score
    failing = task({"question": QUESTION, "question_id": "mco-vf-fail", "n": 1})
    trace = await score(failing, trajectory("[[fail-all]]"))
    print(
        f"{'[[fail-all]]':20} ok {trace.ok}  stop_condition {trace.stop_condition}  "
        f"reward {trace.rewards.get('rubricate')}"
    )


def main() -> None:
    from _platform import gateway, parser

    args = parser(__doc__ or "").parse_args()
    with gateway(args) as urls:
        asyncio.run(run(urls["http"]))


if __name__ == "__main__":
    main()
