"""TRL reward functions for `GRPOTrainer(reward_funcs=[...])`.

    from rubricate.client.trl import RubricateReward
    trainer = GRPOTrainer(model=..., reward_funcs=[RubricateReward("http://gateway:8000")], ...)

TRL calls `reward(prompts=..., completions=..., **columns)` with the dataset's other columns
as lists; the label is the `label` column (JSON text or an object) plus any label fields among
the columns (question, question_id, rubrics, nuggets, kind, step). The reward is None where the
platform could not score a sample, so TRL leaves it out of that reward's mean.
"""

from collections.abc import Mapping, Sequence
from typing import Any

from rubricate.client.http import AsyncClient, Client
from rubricate.client.trainers import (
    LABEL_KEYS,
    AdapterSettings,
    async_client,
    merge_label,
    reward_request,
    scored,
    sync_client,
)
from rubricate.gateway.trainer_schemas import GetRewardRequest, GetRewardResponse


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
) -> GetRewardRequest:
    labels = []
    for i, prompt in enumerate(prompts):
        row = {k: _at(columns.get(k), i) for k in LABEL_KEYS}
        if row.get("question") is None:
            row["question"] = question_of(prompt)
        labels.append(merge_label(_at(columns.get(label_column), i), row))
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
        client: Client | None = None,
    ) -> None:
        self.settings = AdapterSettings.from_env(
            url=url, kind=kind, tenant=tenant, timeout_s=timeout_s, api_key=api_key
        )
        self.label_column = label_column
        self._client = client
        self.__name__ = f"rubricate_{self.settings.kind or 'reward'}"

    def __call__(
        self, prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any
    ) -> list[float | None]:
        request = trl_request(
            prompts, completions, kwargs, label_column=self.label_column, kind=self.settings.kind
        )
        client = self._client or sync_client(self.settings)
        return rewards_or_none(client.get_reward(request))


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
        client: AsyncClient | None = None,
    ) -> None:
        self.settings = AdapterSettings.from_env(
            url=url, kind=kind, tenant=tenant, timeout_s=timeout_s, api_key=api_key
        )
        self.label_column = label_column
        self._client = client
        self.__name__ = f"rubricate_{self.settings.kind or 'reward'}"

    async def __call__(
        self, prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any
    ) -> list[float | None]:
        request = trl_request(
            prompts, completions, kwargs, label_column=self.label_column, kind=self.settings.kind
        )
        client = self._client or async_client(self.settings)
        return rewards_or_none(await client.get_reward(request))
