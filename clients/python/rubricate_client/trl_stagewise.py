"""TRL 1.16: `StagewiseGRPOTrainer`, a `GRPOTrainer` whose loss gets RubricEM's SS-GRPO
advantages per token instead of one advantage per completion.

    from rubricate_client.trl import RubricateReward, StagewiseGRPOTrainer
    reward = RubricateReward("http://gateway:8000", kind="stagewise", group_size=G)
    trainer = StagewiseGRPOTrainer(model=..., reward_funcs=[reward], args=args, ...,
                                   stage_credit=True, stage_lambda="paper")

Everything but the advantages is TRL's own: generation, the reward call, the KL term, the
clipping, the loss type, logging, and the split of a group's completions across processes.
After TRL has scored a generation batch, the trainer reads each completion's stage scores
from the reward function's `/get_reward` answer (`R_<stage>`, `scored`, `fallback`), maps
the completion's stage spans (`rubricate_client.stages`, on the decoded completion) to its
token ids (`rubricate_client.tokens`), gathers the stage rows of the whole generation batch
from every process, computes each group's per-stage advantages (`rubricate_client.ssgrpo`,
through `rubricate_client.stagecredit`) and hands TRL a (batch, tokens) advantage tensor,
which `GRPOTrainer._compute_loss` takes in place of the per-completion one.

`stage_credit=False` (or RUBRICATE_STAGE_CREDIT=off) leaves TRL's advantages untouched:
exactly TRL's GRPO on R_answer. `stage_lambda`: Λ (see `rubricate_client.stagecredit`).
`scale_rewards="none"` centres each stage's returns without dividing by their std (as TRL's
own option); "batch" has no per-stage meaning and is refused.
"""

import logging
import math
from typing import Any

from trl import GRPOTrainer  # type: ignore[import-not-found]

from rubricate_client.constants import STAGES
from rubricate_client.schemas.rewards import GetRewardResponse
from rubricate_client.stagecredit import (
    Row,
    StageCredit,
    credit_row,
    group_advantages,
    per_token,
    stage_ends,
)
from rubricate_client.stages import stage_spans
from rubricate_client.tokens import response_offsets, token_ranges

logger = logging.getLogger(__name__)
PATH = "TRL StagewiseGRPOTrainer"


def is_rubricate_reward(func: Any) -> bool:
    """`rubricate_client.trl.RubricateReward` or `AsyncRubricateReward` (by what the trainer
    uses of them: `rubricate_client.trl` imports this module, not the other way round)."""
    return all(hasattr(func, a) for a in ("last_response", "credit_path", "settings"))


class StagewiseGRPOTrainer(GRPOTrainer):  # type: ignore[misc]
    """A `GRPOTrainer` with per-token SS-GRPO advantages from a Rubricate stagewise reward."""

    def __init__(
        self,
        *args: Any,
        stage_credit: bool | str | None = None,
        stage_lambda: Any = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.stage_credit = StageCredit.from_env(enabled=stage_credit, lam=stage_lambda)
        found = [f for f in self.reward_funcs if is_rubricate_reward(f)]
        if len(found) != 1:
            raise ValueError(
                f"{PATH} needs exactly one RubricateReward (or AsyncRubricateReward) among "
                f"reward_funcs, found {len(found)}"
            )
        self.rubricate_reward: Any = found[0]
        if self.stage_credit.enabled:
            if len(self.reward_funcs) != 1:
                raise ValueError(
                    f"{PATH}: with stage credit on, the Rubricate reward must be the only reward "
                    "function (the stage advantages replace TRL's combined advantage); pass "
                    "stage_credit=False to combine rewards with TRL's own GRPO"
                )
            if self.scale_rewards not in ("group", "none"):
                raise ValueError(
                    f"{PATH}: scale_rewards={self.scale_rewards!r} has no per-stage meaning; "
                    "use 'group' (per-stage std) or 'none' (centred only)"
                )
            kind = self.rubricate_reward.settings.kind
            if kind not in (None, "stagewise"):
                raise ValueError(f"{PATH}: stage credit needs the stagewise reward, not {kind!r}")
        self.rubricate_reward.credit_path = PATH
        self._stage_batch: tuple[GetRewardResponse | None, list[list[int]]] | None = None
        if self.accelerator.is_main_process:
            logger.warning(self.stage_credit.describe(PATH))

    def _calculate_rewards(
        self, inputs: Any, prompts: Any, completions: Any, completion_ids_list: Any
    ) -> Any:
        self.rubricate_reward.last_response = None
        out = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        self._stage_batch = (
            self.rubricate_reward.last_response,
            [[int(i) for i in ids] for ids in completion_ids_list],
        )
        return out

    def _generate_and_score_completions(self, inputs: Any) -> dict[str, Any]:
        self._stage_batch = None
        output: dict[str, Any] = super()._generate_and_score_completions(inputs)
        if not self.stage_credit.enabled:
            return output
        if self._stage_batch is None:
            raise RuntimeError(f"{PATH}: TRL scored this batch without _calculate_rewards")
        response, ids_list = self._stage_batch
        if response is None or len(response.rewards) != len(ids_list):
            raise RuntimeError(
                f"{PATH}: the Rubricate reward did not answer for this batch's "
                f"{len(ids_list)} completions"
            )
        local_ends: list[list[int]] = []
        local_rows: list[Row] = []
        for i, ids in enumerate(ids_list):
            ends, row = self._stage_row(response, i, ids)
            local_ends.append(ends)
            local_rows.append(row)

        # every process's rows, in TRL's gather order (groups of num_generations in a row)
        advantages = output["advantages"]
        local = advantages.double().new_tensor(
            [[math.nan if v is None else v for v in row] for row in local_rows]
        )
        gathered = self.accelerator.gather(local).tolist()
        rows: list[Row] = [[None if math.isnan(v) else v for v in row] for row in gathered]
        mode = "train" if self.model.training else "eval"
        n = self.num_generations if mode == "train" else self.num_generations_eval
        if len(rows) % n:
            raise RuntimeError(f"{PATH}: {len(rows)} completions do not split into groups of {n}")
        group_adv = []
        for g in range(0, len(rows), n):
            group_adv.extend(
                group_advantages(
                    rows[g : g + n],
                    lam=self.stage_credit.lam,
                    scale=self.scale_rewards != "none",
                )
            )
        offset = self.accelerator.process_index * len(ids_list)
        width = int(output["completion_ids"].shape[1])
        matrix = []
        for i, ids in enumerate(ids_list):
            values = per_token(group_adv[offset + i], local_ends[i], len(ids))
            matrix.append(values + [0.0] * (width - len(values)))
        output["advantages"] = advantages.new_tensor(matrix)

        credited = sum(1 for row in rows if row[0] is not None)
        answer_only = sum(1 for row in rows if row[0] is None and row[-1] is not None)
        self._metrics[mode]["rubricate/stage_credited"].append(credited / len(rows))
        self._metrics[mode]["rubricate/answer_only"].append(answer_only / len(rows))
        return output

    def _stage_row(
        self, response: GetRewardResponse, i: int, ids: list[int]
    ) -> tuple[list[int], Row]:
        """Completion i's stage ends in its tokens and its stage scores for SS-GRPO."""
        tokenizer = self._tokenizer
        text = tokenizer.decode(ids, skip_special_tokens=True)
        offsets = response_offsets(tokenizer, ids, text)
        spans = {str(s): span for s, span in stage_spans(text).items()}
        ends = stage_ends(token_ranges(offsets, spans))
        logs = {
            key: response.extra_logs[f"rubricate/{key}"][i]
            for key in ("scored", "fallback", *(f"R_{s}" for s in STAGES))
            if f"rubricate/{key}" in response.extra_logs
        }
        return ends, credit_row(logs, ends, scored_reward=response.rewards[i])
