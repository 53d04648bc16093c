"""verifiers (0.4, `verifiers.v1`) judge backed by Rubricate: `RubricateJudge.score(task,
trace)` sends the rollout to the gateway's `/get_reward` and returns the reward.

    from rubricate_client.verifiers_judge import RubricateJudge, RubricateJudgeConfig

verifiers runs a judge in two ways, and this one works in both:

- **plugged** (`TaskConfig.judges`, `--env.taskset.task.judges`): verifiers resolves a judge
  plugin by `id`, importing `verifiers.v1.judges.<id>` or the top-level module `<id>` and
  taking the `Judge` subclass its `__all__` exports. A dotted id
  (`rubricate_client.verifiers_judge`) does not resolve (its lookup under
  `verifiers.v1.judges` raises), so plug it through a one-line top-level module of your
  own, e.g. `rubricate_judge.py` on the path with
  `from rubricate_client.verifiers_judge import RubricateJudge; __all__ = ["RubricateJudge"]`,
  and the entry `{"id": "rubricate_judge", "rubricate_url": "http://gateway:8000",
  "group_size": 8}`;
- **called from task code**: `await RubricateJudge(config).score(self.data, trace)` in a
  task's `@vf.reward`.

The rollout: the prompt is the task's prompt (`TaskData.prompt_text`), the response the
trace's final reply (`view = "last_reply"`) or its transcript (`"full_trace"`), the label the
task's `label` field (`label_field`; JSON text or an object with `question`, `question_id`,
`rubrics`, `kind`, `nuggets`, `group_key`, ...).

- The reward (the judge's `reward_name`, `rubricate` by default, times the entry's `weight`)
  is the scalar the other trainers get: R_answer for the stagewise kind, the nugget reward
  for the nugget kind.
- The components the platform scored (`R_plan` … `R_answer`, `nugget`, `step`) are recorded
  as trace metrics `rubricate/<name>` (unweighted, outside the reward); a component it has
  no score for (an answer-only fallback's plan, research and review) is recorded as `None`,
  never 0.0. `rubricate/fallback` is 1.0 for an answer-only fallback. With
  `components_as_rewards` the scored components are the rewards instead (each weighted by
  `weight`; verifiers sums a trace's rewards).
- A sample the platform could not score (the judge failed: a null reward) or a failed call
  to the gateway (after the SDK's retries) raises `RubricateJudgeError`. verifiers' scoring
  boundary turns it into a `TaskError` and the rollout's failure: the trace is not ok
  (`stop_condition` `task_error`, the error recorded), and the judge's reward stays `None`
  ("scoring didn't run"), never 0.0.

Groups: verifiers scores each rollout on its own, right after it, and runs an example's
rollouts concurrently. Set `group_size` (the rollouts per example) so the gateway gathers an
example's rollouts, scored in separate calls, and scores them once as one group; the group
key is the label's `group_key`, else a hash of the prompt.

Needs verifiers (imported only where verifiers runs).
"""

import os
from collections.abc import Mapping
from typing import Any

from verifiers.v1 import Judge, JudgeConfig, TaskData, Trace  # type: ignore[import-not-found]
from verifiers.v1.judge import judge_response  # type: ignore[import-not-found]

from rubricate_client.schemas.rewards import GetRewardResponse
from rubricate_client.trainers import (
    get_reward_or_fail,
    group_key_of,
    merge_label,
    reward_request,
    with_group,
)

__all__ = ["RubricateJudge", "RubricateJudgeConfig", "RubricateJudgeError"]


class RubricateJudgeError(RuntimeError):
    """The platform could not score the rollout: a failure, never a reward."""


class RubricateJudgeConfig(JudgeConfig):  # type: ignore[misc]
    id: str = "rubricate_judge"
    name: str = "rubricate"
    """The reward key."""
    rubricate_url: str = os.environ.get("RUBRICATE_URL", "http://127.0.0.1:8000")
    kind: str | None = None
    """The reward kind (default: the label's, else the gateway's)."""
    group_size: int | None = None
    """Rollouts per example, sent as the label's `group_size`."""
    label_field: str = "label"
    """The task field holding the Rubricate label."""
    view: str = "last_reply"
    """`last_reply` (the final reply) or `full_trace` (the transcript) is the response."""
    components_as_rewards: bool = False
    tenant: str | None = None
    timeout_s: float = 900.0


class RubricateJudge(Judge[float, RubricateJudgeConfig]):  # type: ignore[misc]
    async def score(self, task: TaskData, trace: Trace) -> float | Mapping[str, float]:
        config = self.config
        prompt = task.prompt_text
        response = judge_response(trace, config.view)
        label = with_group(
            merge_label(getattr(task, config.label_field, None)),
            group_size=config.group_size,
            group_key=group_key_of(prompt),
            step=None,
        )
        request = reward_request(
            responses=[response], prompts=[prompt], labels=[label], kind=config.kind
        )
        answer = await self._get_reward(request)
        reward = answer.rewards[0]
        if reward is None:
            raise RubricateJudgeError(
                "rubricate could not score this rollout (the judge failed; the gateway "
                "answered a null reward with rubricate/scored = 0)"
            )
        components = {c.name: c.values[0] for c in answer.components}
        for name, value in components.items():
            trace.metrics[f"rubricate/{name}"] = None if value is None else float(value)
        fallback = answer.extra_logs.get("rubricate/fallback", [0.0])[0]
        trace.record_metric("rubricate/fallback", float(fallback))
        if config.components_as_rewards:
            return {k: float(v) for k, v in components.items() if v is not None}
        return float(reward)

    async def _get_reward(self, request: Any) -> GetRewardResponse:
        return await get_reward_or_fail(
            self.config.rubricate_url,
            request,
            timeout_s=self.config.timeout_s,
            tenant=self.config.tenant,
            failure=RubricateJudgeError,
        )
