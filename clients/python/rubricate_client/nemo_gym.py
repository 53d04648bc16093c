"""NeMo Gym (0.7) resources server backed by Rubricate: `verify()` sends the rollout to the
gateway's `/get_reward` and answers NeMo Gym's multi-reward verify response.

    from rubricate_client.nemo_gym import RubricateResourcesServer, RubricateResourcesServerConfig

Each task row carries a Rubricate label (`label`: JSON text or an object with `question`,
`question_id`, `rubrics`, `kind`, `nuggets`, `group_key`, ...); the prompt is the
`responses_create_params.input`, the response the text of the model's output messages.

- `reward`: the scalar the other trainers get (R_answer for the stagewise kind, the nugget
  reward for the nugget kind);
- `reward_components`: the components the platform scored, by name (`R_plan` … `R_answer`,
  `nugget`, `step`), each also a top-level field for NeMo Gym's aggregate metrics; a
  component the platform has no score for (a stage not judged: an answer-only fallback's
  plan, research and review) is left out of the mapping, named in `unscored_components` and
  null at top level, never 0.0;
- a sample the platform could not score (its judge failed: a null reward) raises NeMo Gym's
  `JudgeError`, which NeMo Gym's own `judge_failsafe` (wrapping every `/verify`) turns into
  its failure outcome: `mask_sample` true, `failure_kind` `judge_failed`, the row routed to the
  failures sidecar, out of the metrics and retryable. A failed call to the gateway (after the
  SDK's retries) is the same judge failure.

Groups: NeMo Gym verifies one rollout per call. Set `group_size` (the samples per task) so
the gateway gathers a task's rollouts, sent in separate calls, and scores them once as one
group; the group key is the task's `group_key`, else a hash of the prompt.

Needs NeMo Gym (Python ≥ 3.13); imported only where NeMo Gym runs.
"""

import json
import os
from typing import Any

from nemo_gym.base_resources_server import (  # type: ignore[import-not-found]
    BaseMultiRewardVerifyResponse,
    BaseResourcesServerConfig,
    BaseVerifyRequest,
    SimpleResourcesServer,
)
from nemo_gym.judge import JudgeError, reraise_judge_errors  # type: ignore[import-not-found]
from pydantic import ConfigDict, Field

from rubricate_client.schemas.rewards import STAGE_COMPONENTS
from rubricate_client.trainers import (
    get_reward_or_fail,
    group_key_of,
    merge_label,
    reward_request,
    with_group,
)

CLASS_NAME = "RubricateResourcesServer"


class RubricateResourcesServerConfig(BaseResourcesServerConfig):  # type: ignore[misc]
    rubricate_url: str = os.environ.get("RUBRICATE_URL", "http://127.0.0.1:8000")
    kind: str | None = None
    """The reward kind (default: the label's, else the gateway's)."""
    group_size: int | None = None
    """Rollouts per task, sent as the label's `group_size`."""
    tenant: str | None = None
    timeout_s: float = 900.0


class RubricateVerifyRequest(BaseVerifyRequest):  # type: ignore[misc]
    model_config = ConfigDict(extra="allow", populate_by_name=True)
    label: Any = None
    """The task's Rubricate label (JSON text or an object)."""


class RubricateVerifyResponse(BaseMultiRewardVerifyResponse):  # type: ignore[misc]
    model_config = ConfigDict(extra="allow", populate_by_name=True)
    unscored_components: list[str] = Field(default_factory=list)
    R_plan: float | None = None
    R_research: float | None = None
    R_review: float | None = None
    R_answer: float | None = None
    fallback: bool = False


def _text(value: Any) -> str:
    """Plain text of a Responses-API input or output: strings, messages' content parts."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list | tuple):
        return "\n".join(t for t in (_text(v) for v in value) if t)
    if hasattr(value, "model_dump"):
        value = value.model_dump()
    if isinstance(value, dict):
        if value.get("type") in ("output_text", "input_text", "text"):
            return str(value.get("text", ""))
        if "content" in value:
            return _text(value["content"])
        if value.get("type") == "message":
            return _text(value.get("content"))
    return ""


class RubricateResourcesServer(SimpleResourcesServer):  # type: ignore[misc]
    config: RubricateResourcesServerConfig

    async def verify(self, body: RubricateVerifyRequest) -> RubricateVerifyResponse:
        prompt = _text(getattr(body.responses_create_params, "input", None))
        response = _text(getattr(body.response, "output", None))
        label = with_group(
            merge_label(body.label),
            group_size=self.config.group_size,
            group_key=group_key_of(prompt),
            step=None,
        )
        request = reward_request(
            responses=[response], prompts=[prompt], labels=[label], kind=self.config.kind
        )
        answer = await reraise_judge_errors(self._get_reward(request))
        reward = answer.rewards[0]
        if reward is None:
            raise JudgeError(
                "rubricate could not score this rollout (the judge failed; the gateway "
                "answered a null reward with rubricate/scored = 0)"
            )
        components = {c.name: c.values[0] for c in answer.components}
        scored = {k: float(v) for k, v in components.items() if v is not None}
        fallback = bool(answer.extra_logs.get("rubricate/fallback", [0.0])[0])
        return RubricateVerifyResponse(
            **body.model_dump(),
            reward=float(reward),
            reward_components=scored,
            unscored_components=[k for k, v in components.items() if v is None],
            fallback=fallback,
            **{k: components.get(k) for k in STAGE_COMPONENTS},
        )

    async def _get_reward(self, request: Any) -> Any:
        return await get_reward_or_fail(
            self.config.rubricate_url,
            request,
            timeout_s=self.config.timeout_s,
            tenant=self.config.tenant,
            failure=JudgeError,
        )


def label_json(label: Any) -> str:
    """A label as the JSON text a task row carries."""
    return label if isinstance(label, str) else json.dumps(label)
