"""TRL (1.16) reward functions for `GRPOTrainer(reward_funcs=[...])`.

    from rubricate_client.trl import RubricateReward
    reward = RubricateReward("http://gateway:8000", group_size=args.num_generations)
    trainer = GRPOTrainer(model=..., reward_funcs=[reward], args=args, ...)

TRL calls `reward(prompts=..., completions=..., trainer_state=..., log_metric=...,
log_extra=..., **columns)` with the dataset's other columns as lists; the label is the `label`
column (JSON text or an object) plus any label fields among the columns (question,
question_id, rubrics, nuggets, kind, step, group_key, group_size). The reward is None where
the platform could not score a sample, so TRL leaves it out of that reward's mean.

Groups: each sample goes with `group_size` (TRL's `num_generations`), `group_key` (a hash of
the prompt, unless the dataset has a `group_key` column) and `step` (`trainer_state
.global_step`). Under `torchrun --nproc_per_node N` TRL splits one prompt's completions across
the processes; each process sends its part, and the gateway gathers the parts into one group.

Logging: per-stage scores (`rubricate/R_<stage>`, the mean over scored samples), the scored,
fallback and partial-group fractions and the mean group size through `log_metric`, and the
per-sample values as completion table columns through `log_extra`.

Stage credit: `GRPOTrainer` computes one advantage per completion from the scalar reward, so
with TRL's own trainer and `RubricateReward` the policy trains on R_answer (plain GRPO).
`RubricateComponentRewards` gives TRL one reward function per stage component (R_plan …
R_answer, one `/get_reward` call per batch for all of them) and their weights from Λ, for
`GRPOConfig(multi_objective_aggregation="normalize_then_sum", reward_weights=...)`: TRL then
normalizes each stage's score within its group and sums them (GDPO), stage-normalized credit
at sequence level with TRL's own trainer. `StagewiseGRPOTrainer`
(imported from here, defined in `rubricate_client.trl_stagewise`; it needs TRL) is a
`GRPOTrainer` whose loss gets per-token SS-GRPO advantages: each stage's tokens get that
stage's advantage A_k (see `rubricate_client.stagecredit`).

`AsyncGRPOTrainer` (`trl.experimental.async_grpo`): `RubricateReward` and
`AsyncRubricateReward` go into `reward_funcs` as they are (they pickle into its spawned rollout
worker, which calls them once per whole group with no `trainer_state`, so `step` is not
sent and a group is keyed by its prompt). The policy trains on R_answer; an unscored
completion gets advantage 0. `RubricateComponentRewards` refuses to be pickled there: that
worker sums reward functions unweighted, not normalized one by one.
"""

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rubricate_client.http import AsyncClient, Client
from rubricate_client.schemas.rewards import (
    STAGE_COMPONENTS,
    GetRewardRequest,
    GetRewardResponse,
)
from rubricate_client.stagecredit import component_weights
from rubricate_client.trainers import (
    LABEL_KEYS,
    SAMPLE_LOGS,
    AdapterSettings,
    async_client,
    group_key_of,
    merge_label,
    reward_request,
    scored,
    sync_client,
    with_group,
)

logger = logging.getLogger(__name__)

BATCH_MEANS = ("scored", "fallback", "partial_group", "group_size")
"""Logged as the mean over the whole batch; the scores, over the scored samples."""
LogMetric = Callable[[str, float], None]
LogExtra = Callable[[str, list[Any]], None]


def text_of(item: Any) -> str:
    """Plain text of a prompt or completion: a string, or chat messages' contents joined."""
    if isinstance(item, str):
        return item
    if isinstance(item, Mapping):
        return str(item.get("content", ""))
    if isinstance(item, Sequence):
        return "\n".join(text_of(m) for m in item)
    return str(item)


def question_of(prompt: Any) -> str | None:
    """The last user message of a chat prompt; None for a plain-text prompt."""
    if isinstance(prompt, Sequence) and not isinstance(prompt, str):
        users = [m for m in prompt if isinstance(m, Mapping) and m.get("role") == "user"]
        if users:
            return str(users[-1].get("content", ""))
    return None


def trl_request(
    prompts: Sequence[Any],
    completions: Sequence[Any],
    columns: Mapping[str, Any],
    *,
    label_column: str,
    kind: str | None,
    group_size: int | None = None,
    step: int | None = None,
) -> GetRewardRequest:
    labels = []
    for i, prompt in enumerate(prompts):
        row = {k: _at(columns.get(k), i) for k in LABEL_KEYS}
        if row.get("question") is None:
            row["question"] = question_of(prompt)
        label = merge_label(_at(columns.get(label_column), i), row)
        labels.append(
            with_group(
                label,
                group_size=group_size,
                group_key=group_key_of(text_of(prompt)),
                step=step,
            )
        )
    return reward_request(
        responses=[text_of(c) for c in completions],
        prompts=[text_of(p) for p in prompts],
        labels=labels,
        kind=kind,
    )


def _at(column: Any, i: int) -> Any:
    if isinstance(column, Sequence) and not isinstance(column, str) and i < len(column):
        return column[i]
    return None


def rewards_or_none(response: GetRewardResponse) -> list[float | None]:
    return [r if ok else None for r, ok in zip(response.rewards, scored(response), strict=True)]


def step_of(trainer_state: Any) -> int | None:
    step = getattr(trainer_state, "global_step", None)
    return None if step is None else int(step)


def log_response(
    response: GetRewardResponse, log_metric: LogMetric | None, log_extra: LogExtra | None
) -> None:
    """Through TRL's hooks: the scored and fallback fractions and the mean of each stage's
    score over the scored samples as metrics; every per-sample value as a table column."""
    ok = scored(response)
    n = len(ok)
    logs = {k: response.extra_logs.get(f"rubricate/{k}") for k in SAMPLE_LOGS}
    if log_metric is not None:
        for key, values in logs.items():
            if values is None:
                continue
            if key in BATCH_MEANS:
                log_metric(f"rubricate/{key}", sum(values) / n)
            elif any(ok):
                log_metric(
                    f"rubricate/{key}",
                    sum(v for v, s in zip(values, ok, strict=True) if s) / sum(ok),
                )
    if log_extra is not None:
        for key, values in logs.items():
            log_extra(f"rubricate/{key}", [0.0] * n if values is None else list(values))


_announced: set[int] = set()


def announce_plain(reward: "RubricateReward | AsyncRubricateReward") -> None:
    """The start-up line of a reward function in TRL's own `GRPOTrainer`, once: no stage
    credit there (`StagewiseGRPOTrainer` announces its own path and sets `credit_path`)."""
    if reward.credit_path is None and id(reward) not in _announced:
        _announced.add(id(reward))
        logger.warning(
            "rubricate stage credit: none (TRL GRPOTrainer or AsyncGRPOTrainer with %s): one "
            "advantage per completion, GRPO on R_answer; use "
            "rubricate_client.trl.StagewiseGRPOTrainer for SS-GRPO per-token stage credit",
            reward.__name__,
        )


def __getattr__(name: str) -> Any:
    """`StagewiseGRPOTrainer` is imported on first use: it needs TRL (the reward functions
    above do not)."""
    if name == "StagewiseGRPOTrainer":
        from rubricate_client.trl_stagewise import StagewiseGRPOTrainer

        return StagewiseGRPOTrainer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class RubricateReward:
    """A synchronous TRL reward function (`__name__` names it in TRL's logs)."""

    def __init__(
        self,
        url: str | None = None,
        *,
        kind: str | None = None,
        tenant: str | None = None,
        label_column: str = "label",
        timeout_s: float | None = None,
        api_key: str | None = None,
        group_size: int | None = None,
        client: Client | None = None,
    ) -> None:
        self.settings = AdapterSettings.from_env(
            url=url,
            kind=kind,
            tenant=tenant,
            timeout_s=timeout_s,
            api_key=api_key,
            group_size=group_size,
        )
        self.label_column = label_column
        self._client = client
        self.__name__ = f"rubricate_{self.settings.kind or 'reward'}"
        self.last_response: GetRewardResponse | None = None
        """The platform's answer for the last call's completions (in their order), which
        `StagewiseGRPOTrainer` reads for the stage scores."""
        self.credit_path: str | None = None
        """Set by `StagewiseGRPOTrainer`; None: TRL's own trainer (R_answer only)."""

    def __call__(
        self,
        prompts: Sequence[Any],
        completions: Sequence[Any],
        trainer_state: Any = None,
        log_metric: LogMetric | None = None,
        log_extra: LogExtra | None = None,
        **kwargs: Any,
    ) -> list[float | None]:
        request = trl_request(
            prompts,
            completions,
            kwargs,
            label_column=self.label_column,
            kind=self.settings.kind,
            group_size=self.settings.group_size,
            step=step_of(trainer_state),
        )
        announce_plain(self)
        client = self._client or sync_client(self.settings)
        response = client.get_reward(request)
        self.last_response = response
        log_response(response, log_metric, log_extra)
        return rewards_or_none(response)


class AsyncRubricateReward:
    """The async variant: `await reward(prompts=..., completions=..., **columns)`."""

    def __init__(
        self,
        url: str | None = None,
        *,
        kind: str | None = None,
        tenant: str | None = None,
        label_column: str = "label",
        timeout_s: float | None = None,
        api_key: str | None = None,
        group_size: int | None = None,
        client: AsyncClient | None = None,
    ) -> None:
        self.settings = AdapterSettings.from_env(
            url=url,
            kind=kind,
            tenant=tenant,
            timeout_s=timeout_s,
            api_key=api_key,
            group_size=group_size,
        )
        self.label_column = label_column
        self._client = client
        self.__name__ = f"rubricate_{self.settings.kind or 'reward'}"
        self.last_response: GetRewardResponse | None = None
        self.credit_path: str | None = None

    async def __call__(
        self,
        prompts: Sequence[Any],
        completions: Sequence[Any],
        trainer_state: Any = None,
        log_metric: LogMetric | None = None,
        log_extra: LogExtra | None = None,
        **kwargs: Any,
    ) -> list[float | None]:
        request = trl_request(
            prompts,
            completions,
            kwargs,
            label_column=self.label_column,
            kind=self.settings.kind,
            group_size=self.settings.group_size,
            step=step_of(trainer_state),
        )
        announce_plain(self)
        client = self._client or async_client(self.settings)
        response = await client.get_reward(request)
        self.last_response = response
        log_response(response, log_metric, log_extra)
        return rewards_or_none(response)


# ------------------------------------------------------------------ components (GDPO)


class RubricateComponentRewards:
    """One TRL reward function per reward component, for TRL's decoupled normalization:

        rewards = RubricateComponentRewards("http://gateway:8000", group_size=8)
        args = GRPOConfig(num_generations=8, multi_objective_aggregation="normalize_then_sum",
                          reward_weights=rewards.reward_weights, ...)
        trainer = GRPOTrainer(model=..., reward_funcs=rewards.reward_funcs, args=args, ...)

    `reward_funcs[i]` returns component `names[i]` of each completion (`rubricate_R_plan`, …
    in TRL's logs), None where the platform has no such score (the sample was not scored, or
    the stage was not judged: an answer-only fallback's plan, research and review), which TRL
    leaves out of that component's group statistics; a completion with every component None
    gets advantage 0. The functions share one `/get_reward` call per batch: the first one TRL
    calls sends it, the others read its answer. `reward_weights` are Λ's column sums
    (`stagecredit.component_weights`: 1.0, 1.4, 2.0, 3.4 for RubricEM's Λ) for the stage
    components, 1.0 for `nugget` and `step`."""

    def __init__(
        self,
        url: str | None = None,
        *,
        components: Sequence[str] = STAGE_COMPONENTS,
        stage_lambda: Any = None,
        kind: str | None = "stagewise",
        tenant: str | None = None,
        label_column: str = "label",
        timeout_s: float | None = None,
        api_key: str | None = None,
        group_size: int | None = None,
        client: Client | None = None,
    ) -> None:
        self.names = tuple(components)
        if not self.names or len(set(self.names)) != len(self.names):
            raise ValueError(f"components must be distinct names, got {list(components)}")
        self.reward = RubricateReward(
            url,
            kind=kind,
            tenant=tenant,
            label_column=label_column,
            timeout_s=timeout_s,
            api_key=api_key,
            group_size=group_size,
            client=client,
        )
        self.reward.credit_path = "components"
        stage_weights = dict(zip(STAGE_COMPONENTS, component_weights(stage_lambda), strict=True))
        self.reward_weights = [stage_weights.get(name, 1.0) for name in self.names]
        self.reward_funcs = [_ComponentReward(self, name) for name in self.names]
        self._lock = threading.Lock()
        self._batch: tuple[Any, ...] | None = None
        self._served: set[str] = set()
        self.last_response: GetRewardResponse | None = None
        self._announced = False

    def __getstate__(self) -> dict[str, Any]:
        """Refused: only a trainer that normalizes each reward function on its own (TRL's
        `GRPOTrainer` with `normalize_then_sum`) gives the components their credit, and it
        calls them in process. `AsyncGRPOTrainer` pickles its reward functions into its rollout
        worker and sums them unweighted and unnormalized (`_score_group`'s `np.nansum`), which
        is not decoupled normalization."""
        raise TypeError(
            "RubricateComponentRewards is for TRL's GRPOTrainer with "
            "multi_objective_aggregation='normalize_then_sum'; a trainer that pickles its "
            "reward functions (TRL's AsyncGRPOTrainer: its rollout worker sums them "
            "unweighted, without per-function normalization) would not give the components "
            "their credit. Use RubricateReward there (GRPO on R_answer)."
        )

    def response_for(
        self,
        name: str,
        prompts: Sequence[Any],
        completions: Sequence[Any],
        trainer_state: Any,
        log_metric: LogMetric | None,
        log_extra: LogExtra | None,
        kwargs: Mapping[str, Any],
    ) -> GetRewardResponse:
        """The platform's answer for this batch: fetched by the first component function
        TRL calls, read by the others (a new batch, or a component asked twice, fetches)."""
        key = (
            step_of(trainer_state),
            tuple(text_of(p) for p in prompts),
            tuple(text_of(c) for c in completions),
        )
        with self._lock:
            if self._batch == key and name not in self._served and self.last_response:
                self._served.add(name)
                return self.last_response
            if not self._announced:
                self._announced = True
                logger.warning(
                    "rubricate stage credit: components (TRL GRPOTrainer with %s, weights %s): "
                    "one advantage per completion from the components normalized within their "
                    "group and summed (needs multi_objective_aggregation='normalize_then_sum')",
                    ", ".join(f.__name__ for f in self.reward_funcs),
                    self.reward_weights,
                )
            self.reward(prompts, completions, trainer_state, log_metric, log_extra, **kwargs)
            response = self.reward.last_response
            assert response is not None
            self.last_response = response
            self._batch = key
            self._served = {name}
            return response


class _ComponentReward:
    """TRL reward function for one component of a `RubricateComponentRewards`."""

    def __init__(self, owner: RubricateComponentRewards, name: str) -> None:
        self.owner = owner
        self.name = name
        self.__name__ = f"rubricate_{name}"

    def __call__(
        self,
        prompts: Sequence[Any],
        completions: Sequence[Any],
        trainer_state: Any = None,
        log_metric: LogMetric | None = None,
        log_extra: LogExtra | None = None,
        **kwargs: Any,
    ) -> list[float | None]:
        response = self.owner.response_for(
            self.name, prompts, completions, trainer_state, log_metric, log_extra, kwargs
        )
        ok = scored(response)
        values = response.component(self.name)
        return [v if s else None for v, s in zip(values, ok, strict=True)]
