"""veRL 0.9.1: the `rubricate` reward manager, the `rubricate_ssgrpo` advantage estimator and
the stage-credit shim of veRL's streamed reward path. Importing this module (in the trainer's
environment, where veRL and PyTorch are installed) registers the manager and the estimator
with veRL's own registries and, unless stage credit is off, installs the shim:

    reward:
      reward_manager: {source: importlib, name: RubricateRewardManager,
                       module: {path: "pkg://rubricate_client.verl_manager"}}
      # or, with VERL_USE_EXTERNAL_MODULES=rubricate_client.verl_manager:
      # reward_manager: {source: register, name: rubricate}
    algorithm:
      adv_estimator: rubricate_ssgrpo       # needs VERL_USE_EXTERNAL_MODULES (above)
      use_kl_in_reward: false

The manager sends each sample veRL hands it (`run_single`) to `/get_reward` with the prompt and
its group fields: `group_key` = veRL's `uid` (the same for the n samples of one prompt in one
step), `group_size` = `actor_rollout_ref.rollout.n`, `step` where veRL says it. The gateway
gathers the group and scores it once. The reward (`reward_score`) is R_answer; the manager maps
the response's stage spans to its tokens with the trainer's tokenizer and returns, in
`reward_extra_info`, each stage's score (`R_<stage>`), the index of each stage's last response
token (`stage_end_<stage>`), `stage_credit` (1.0 where the sample's four stages were found and
scored, so its stage rewards are to be placed) and `stage_response_len` (the response length
those indices refer to).

Where the stage rewards go into veRL's token rewards (`rm_scores`), for each credited sample:
at each stage's last token, R_plan, then each stage's score minus the previous stage's, so the
token rewards sum to R_answer (veRL's score metrics, validation and group filtering still see
R_answer) and their running sum gives back every R_k. A stage increment of exactly 0 is
written as -0.0, so the position survives (a value that is not +0.0 marks a stage end). Three
writers, one layout:

- after the rollout (`RewardLoopManager.compute_rm_score`): the manager's
  `assemble_rm_scores`;
- streamed, veRL's default without a reward model: veRL itself writes the scalar on the last
  token, in `AgentLoopOutput.as_dict` (the v1 trainer, `trainer.use_v1=true`, the default) or
  `AgentLoopWorker._postprocess` (the legacy trainer). The shim wraps both: after veRL's own
  code, it rewrites the row of a credited sample from its `reward_extra_info`. Before it wraps
  them, it checks veRL's code does what the shim expects (signatures, and a probe of each on a
  one-sample input: the scalar lands on the last response token, `reward_extra_info` reaches
  the output) and raises `VerlInternalsChanged` at import otherwise, so a changed veRL fails
  the run instead of training plain GRPO unnoticed. RUBRICATE_STAGE_CREDIT=off installs
  nothing: veRL's own path, untouched.

The estimator reads the stage rewards back from `token_level_rewards`: a response carries
either four marked stage ends (a credited sample) or a single reward (answer only: a fallback,
a sample with a stage missing, or veRL's scalar layout). It computes RubricEM's per-stage
returns with Λ (RUBRICATE_STAGE_LAMBDA) and per-stage group advantages
(`rubricate_client.stagecredit`, `rubricate_client.ssgrpo`) per veRL group (`uid`) and gives
every token its stage's advantage. With stage credit off it is veRL's own
`compute_grpo_outcome_advantage` on the summed token rewards, R_answer. `use_kl_in_reward`
(which adds a penalty to every token) is refused: use the KL loss.
"""

import asyncio
import functools
import importlib
import inspect
import logging
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch
from verl import DataProto  # type: ignore[import-not-found]
from verl.experimental.reward_loop.reward_manager import (  # type: ignore[import-not-found]
    register,
)
from verl.experimental.reward_loop.reward_manager.base import (  # type: ignore[import-not-found]
    RewardManagerBase,
)
from verl.experimental.reward_loop.reward_manager.registry import (  # type: ignore[import-not-found]
    REWARD_MANAGER,
)
from verl.trainer.ppo.core_algos import (  # type: ignore[import-not-found]
    ADV_ESTIMATOR_REGISTRY,
    compute_grpo_outcome_advantage,
    register_adv_est,
)

from rubricate_client.constants import N_STAGES, STAGES, Stage
from rubricate_client.ssgrpo import stage_returns
from rubricate_client.stagecredit import (
    Row,
    StageCredit,
    credit_row,
    group_advantages,
    increments,
    per_token,
)
from rubricate_client.stages import stage_spans
from rubricate_client.tokens import response_offsets, token_ranges
from rubricate_client.trainers import (
    AdapterSettings,
    async_client,
    merge_label,
    per_sample,
    reward_request,
    with_group,
)

logger = logging.getLogger(__name__)

MANAGER_NAME = "rubricate"
ESTIMATOR_NAME = "rubricate_ssgrpo"
TRAINER = "veRL"
STAGE_END_KEYS = tuple(f"stage_end_{s}" for s in STAGES)
"""reward_extra_info: the index of each stage's last response token (-1: no such stage)."""
STAGE_CREDIT_KEY = "stage_credit"
"""reward_extra_info: 1.0 where the sample's four stage rewards are to be placed."""
STAGE_LEN_KEY = "stage_response_len"
"""reward_extra_info: the number of response tokens the stage ends index."""
SHIM_MARK = "__rubricate_stage_credit__"


class VerlInternalsChanged(RuntimeError):
    """veRL's streamed reward path is not the code the stage-credit shim was written for."""


class StageReward(float):
    """A sample's scalar reward (R_answer) that also carries where each stage's reward goes:
    `(token index, reward)` per stage, in stage order; empty when only the scalar applies."""

    stage_tokens: tuple[tuple[int, float], ...]

    def __new__(cls, value: float, stage_tokens: Sequence[tuple[int, float]] = ()) -> "StageReward":
        out = super().__new__(cls, value)
        out.stage_tokens = tuple(stage_tokens)
        return out

    def __reduce__(self) -> tuple[Any, ...]:
        return (StageReward, (float(self), self.stage_tokens))


def stage_placement(
    logs: Mapping[str, float],
    offsets: Sequence[tuple[int, int]],
    text: str,
) -> tuple[dict[Stage, int], list[tuple[int, float]]]:
    """Each stage's last token, and the stage rewards to place: one per stage when all four
    stages were scored and found in the tokens, else none (the answer-only scalar)."""
    ranges = token_ranges(offsets, {str(s): span for s, span in stage_spans(text).items()})
    ends: dict[Stage, int] = {}
    for stage in STAGES:
        found = ranges[stage]
        ends[stage] = found[1] - 1 if found is not None else -1
    positions = [ends[s] for s in STAGES]
    row = credit_row(logs, positions, scored_reward=logs.get("score"))
    if row[0] is None:
        return ends, []
    return ends, [(ends[s], float(logs[f"R_{s}"])) for s in STAGES]


def write_stage_rewards(row: torch.Tensor, placed: Sequence[tuple[int, float]]) -> None:
    """Rewrite one response's token rewards in place: the stage increments at the stage ends
    (see the module's docstring), zero elsewhere."""
    if any(token < 0 or token >= row.shape[0] for token, _ in placed):
        raise ValueError(
            f"stage ends {[t for t, _ in placed]} fall outside a response of {row.shape[0]} tokens"
        )
    row.zero_()
    values = increments([value for _, value in placed])
    for (token, _), value in zip(placed, values, strict=True):
        cell = torch.tensor(value, dtype=row.dtype)
        row[token] = cell if bool(cell != 0) else torch.tensor(-0.0, dtype=row.dtype)


def placement_of(info: Mapping[str, Any]) -> list[tuple[int, float]]:
    """The stage rewards a sample's `reward_extra_info` asks to place (empty: none)."""
    if float(info.get(STAGE_CREDIT_KEY, 0.0)) < 0.5:
        return []
    return [(int(info[f"stage_end_{s}"]), float(info[f"R_{s}"])) for s in STAGES]


class RubricateRewardManager(RewardManagerBase):  # type: ignore[misc]
    """veRL reward manager: one `/get_reward` request per sample with its group fields."""

    def __init__(
        self,
        config: Any,
        tokenizer: Any,
        compute_score: Any = None,
        reward_router_address: str | None = None,
        reward_model_tokenizer: Any = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(config, tokenizer, compute_score)
        reward_cfg = _get(config, "reward", "custom_reward_function", "reward_kwargs") or {}
        options = {**dict(reward_cfg), **kwargs}
        options.setdefault("group_size", _get(config, "actor_rollout_ref", "rollout", "n"))
        self.settings = AdapterSettings.from_env(**options)
        self.stage_credit = StageCredit.from_env(enabled=options.get("stage_credit"))

    async def run_single(self, data: DataProto) -> dict[str, Any]:
        item = data[-1]
        prompt_ids = item.batch["prompts"]
        response_ids = item.batch["responses"]
        prompt_length = prompt_ids.shape[-1]
        mask = item.batch["attention_mask"]
        valid_prompt = prompt_ids[prompt_length - int(mask[:prompt_length].sum()) :]
        valid_response = response_ids[: int(mask[prompt_length:].sum())].tolist()
        prompt = self.tokenizer.decode(valid_prompt, skip_special_tokens=True)
        response = self.tokenizer.decode(valid_response, skip_special_tokens=True)

        extra = dict(item.non_tensor_batch.get("extra_info") or {})
        reward_model = item.non_tensor_batch.get("reward_model") or {}
        uid = item.non_tensor_batch.get("uid")
        step = extra.get("step", data.meta_info.get("global_steps"))
        label = with_group(
            merge_label(reward_model.get("ground_truth"), extra),
            group_size=self.settings.group_size,
            group_key=None if uid is None else str(uid),
            step=None if step is None or int(step) < 0 else int(step),
        )
        request = reward_request(
            responses=[response], prompts=[prompt], labels=[label], kind=self.settings.kind
        )
        result = await async_client(self.settings).get_reward(request)
        logs = per_sample(result, 0, settings=self.settings, trainer=TRAINER)
        offsets = await asyncio.get_running_loop().run_in_executor(
            None, lambda: response_offsets(self.tokenizer, valid_response, response)
        )
        ends, placed = stage_placement(logs, offsets, response)
        if not self.stage_credit.enabled:
            placed = []
        info = {
            **logs,
            **{f"stage_end_{s}": float(ends[s]) for s in STAGES},
            STAGE_CREDIT_KEY: 1.0 if placed else 0.0,
            STAGE_LEN_KEY: float(len(valid_response)),
        }
        return {"reward_score": StageReward(logs["score"], placed), "reward_extra_info": info}

    @classmethod
    def assemble_rm_scores(cls, data: DataProto, scores: list[float]) -> torch.Tensor:
        """veRL's layout (the scalar on the last response token), with the stage rewards at
        the stage ends where the sample carries them (`write_stage_rewards`)."""
        prompt_length = data.batch["prompts"].size(1)
        lengths = data.batch["attention_mask"][:, prompt_length:].sum(dim=1)
        rm_scores = torch.zeros_like(data.batch["responses"], dtype=torch.float32)
        for i, score in enumerate(scores):
            placed = getattr(score, "stage_tokens", ())
            if placed:
                write_stage_rewards(rm_scores[i], placed)
            else:
                rm_scores[i, int(lengths[i]) - 1] = float(score)
        return rm_scores


def stage_scores(row: torch.Tensor, length: int) -> tuple[Row, list[int]]:
    """One response's stage scores (None: a stage without a reward) and stage end tokens,
    read from its token rewards as the writers left them: four marked stage ends carry the
    stage increments (their running sum is R_k), one or none is a scalar reward (answer
    only, its tokens running to `length`)."""
    marked = (row != 0) | torch.signbit(row)
    ends = [int(i) for i in torch.nonzero(marked).flatten().tolist()]
    if len(ends) == N_STAGES:
        total = 0.0
        scores: Row = []
        for i in ends:
            total += float(row[i])
            scores.append(total)
        return scores, ends
    if len(ends) <= 1:
        answer = float(row.sum())
        return [None] * (N_STAGES - 1) + [answer], [-1] * (N_STAGES - 1) + [length - 1]
    raise ValueError(
        f"a response carries {len(ends)} marked token rewards: expected {N_STAGES} (stage "
        "rewards from the rubricate reward manager) or 1 (a scalar reward)"
    )


_announced: set[str] = set()


def _announce(line: str) -> None:
    if line not in _announced:
        _announced.add(line)
        logger.warning(line)


def compute_ssgrpo_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray[Any, Any],
    epsilon: float = 1e-6,
    norm_adv_by_std_in_grpo: bool = True,
    config: Any = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """RubricEM's SS-GRPO advantages per token: each token gets the advantage of its stage,
    normalized per stage across its veRL group (`index`, the uid). Returns (advantages,
    returns), both (batch, response_length), zero outside the response mask. Stage credit
    off: veRL's own GRPO."""
    if config is not None and _get(config, "use_kl_in_reward"):
        raise ValueError(
            f"{ESTIMATOR_NAME} reads the stage rewards from the reward tensor: set "
            "algorithm.use_kl_in_reward=false (use the actor's KL loss instead)"
        )
    if config is not None and _get(config, "norm_adv_by_std_in_grpo") is not None:
        norm_adv_by_std_in_grpo = bool(_get(config, "norm_adv_by_std_in_grpo"))
    credit = StageCredit.from_env()
    if not credit.enabled:
        _announce(credit.describe(f"veRL {ESTIMATOR_NAME}"))
        advantages, returns = compute_grpo_outcome_advantage(
            token_level_rewards=token_level_rewards,
            response_mask=response_mask,
            index=index,
            epsilon=epsilon,
            norm_adv_by_std_in_grpo=norm_adv_by_std_in_grpo,
            config=config,
        )
        return advantages, returns
    _announce(credit.describe(f"veRL {ESTIMATOR_NAME}"))
    # a response's tokens run to its last generated token (tool outputs inside it are masked
    # out of the loss, not out of the stages)
    positions = torch.arange(1, response_mask.shape[-1] + 1, device=response_mask.device)
    lengths = [int(v) for v in ((response_mask > 0) * positions).amax(dim=-1).tolist()]
    rows = [stage_scores(token_level_rewards[i], n) for i, n in enumerate(lengths)]
    if not any(r[0][0] is not None for r in rows):
        logger.warning(
            "%s: no response of this batch of %d carries stage rewards: every sample is "
            "answer-only (judge fallbacks, missing stages) or the stage rewards never reached "
            "the reward tensor (is the stage-credit shim installed in the rollout workers? "
            "VERL_USE_EXTERNAL_MODULES=rubricate_client.verl_manager)",
            ESTIMATOR_NAME,
            len(rows),
        )
    groups: dict[Any, list[int]] = defaultdict(list)
    for i, uid in enumerate(index):
        groups[uid].append(i)
    advantages = torch.zeros_like(token_level_rewards, dtype=torch.float32)
    returns = torch.zeros_like(token_level_rewards, dtype=torch.float32)
    for members in groups.values():
        scores = [rows[i][0] for i in members]
        a = group_advantages(scores, lam=credit.lam, scale=norm_adv_by_std_in_grpo, eps=epsilon)
        g = stage_returns(scores, lam=credit.lam)
        for pos, i in enumerate(members):
            n = lengths[i]
            ends = rows[i][1]
            advantages[i, :n] = torch.tensor(per_token(a[pos], ends, n))
            returns[i, :n] = torch.tensor(per_token(g[pos], ends, n))
    return advantages * response_mask, returns * response_mask


# Registered once per process: veRL may import this module by name (VERL_USE_EXTERNAL_MODULES,
# pkg://) and again from its file path (a second module object), and its registries refuse a
# second, different object under one name.
if MANAGER_NAME not in REWARD_MANAGER:
    register(MANAGER_NAME)(RubricateRewardManager)
if ESTIMATOR_NAME not in ADV_ESTIMATOR_REGISTRY:
    register_adv_est(ESTIMATOR_NAME)(compute_ssgrpo_advantage)


def _get(config: Any, *path: str) -> Any:
    for key in path:
        if config is None:
            return None
        getter = getattr(config, "get", None)
        config = getter(key) if callable(getter) else getattr(config, key, None)
    return config


# ------------------------------------------------------------ the streamed path's stage credit

STREAMED_MODULE = "verl.experimental.agent_loop.agent_loop"
V1_MODULE = "verl.trainer.ppo.v1.agent_loop_tq"


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("verl")
    except Exception:  # pragma: no cover - metadata missing
        return "?"


def _expect(condition: bool, what: str) -> None:
    if not condition:
        raise VerlInternalsChanged(
            f"rubricate stage credit: veRL {_version()}'s streamed reward path is not what the "
            f"shim was written for (veRL 0.9.1): {what}. The stage rewards could not reach the "
            "reward tensor there, and SS-GRPO would silently train GRPO on R_answer. Set "
            "RUBRICATE_STAGE_CREDIT=off to train GRPO on R_answer knowingly."
        )


def _params(fn: Any) -> list[str]:
    """The parameter names, less the `_ray_trace_ctx` keyword that Ray adds to the methods
    of a class it turns into an actor."""
    return [p for p in inspect.signature(fn).parameters if p != "_ray_trace_ctx"]


def _original(fn: Any) -> Any:
    """veRL's own function under the shim's wrapper (the wrapper keeps it as __wrapped__)."""
    return fn.__wrapped__ if getattr(fn, SHIM_MARK, False) else fn


def check_streamed_internals(module: Any, v1_module: Any = None) -> None:
    """Check that veRL's streamed reward path is the code the shim wraps: the classes and
    signatures, and a probe of each wrapped function on a one-sample input (the reward lands
    on the last response token; `reward_extra_info` reaches the output). Raises
    `VerlInternalsChanged` naming what differs."""
    names = ("AgentLoopOutput", "AgentLoopMetrics", "AgentLoopWorker", "_InternalAgentLoopOutput")
    missing = [n for n in names if not hasattr(module, n)]
    _expect(not missing, f"{module.__name__} has no {', '.join(missing)}")
    output_cls, metrics_cls = module.AgentLoopOutput, module.AgentLoopMetrics
    worker_cls, internal_cls = module.AgentLoopWorker, module._InternalAgentLoopOutput
    fields = set(getattr(output_cls, "model_fields", {}))
    wanted = {"prompt_ids", "response_ids", "response_mask", "reward_score", "extra_fields"}
    _expect(wanted <= fields, f"AgentLoopOutput lacks the fields {sorted(wanted - fields)}")

    as_dict = _original(output_cls.as_dict)
    _expect(_params(as_dict) == ["self"], f"AgentLoopOutput.as_dict{inspect.signature(as_dict)}")
    try:
        probe = output_cls(
            prompt_ids=[1, 2],
            response_ids=[5, 6, 7],
            response_mask=[1, 1, 1],
            reward_score=0.25,
            metrics=metrics_cls(),
            extra_fields={"reward_extra_info": {"probe": 1.0}},
        )
        out = as_dict(probe)
    except Exception as exc:
        raise VerlInternalsChanged(f"probing AgentLoopOutput.as_dict failed: {exc!r}") from exc
    rm = out.get("rm_scores")
    _expect(
        isinstance(rm, torch.Tensor) and rm.tolist() == [0.0, 0.0, 0.25],
        f"AgentLoopOutput.as_dict wrote rm_scores={rm!r} for a reward of 0.25 on 3 response "
        "tokens, not the reward on the last token",
    )
    info = (out.get("extra_fields") or {}).get("reward_extra_info") or {}
    _expect(info.get("probe") == 1.0, "AgentLoopOutput.as_dict drops reward_extra_info")

    post = _original(worker_cls._postprocess)
    expected = ["self", "inputs", "input_non_tensor_batch", "validate"]
    _expect(_params(post) == expected, f"AgentLoopWorker._postprocess{inspect.signature(post)}")
    try:
        sample = internal_cls(
            prompt_ids=torch.tensor([[0, 1]]),
            response_ids=torch.tensor([[5, 6, 0]]),
            input_ids=torch.tensor([[0, 1, 5, 6, 0]]),
            position_ids=torch.tensor([[0, 0, 1, 2, 0]]),
            response_mask=torch.tensor([[1, 1, 0]]),
            attention_mask=torch.tensor([[0, 1, 1, 1, 0]]),
            reward_score=0.25,
            num_turns=2,
            metrics=metrics_cls(),
            extra_fields={"reward_extra_info": {"probe": 1.0}},
        )
        fake_worker = SimpleNamespace(reward_loop_worker_handles=None)
        data = post(fake_worker, [sample], input_non_tensor_batch=None, validate=False)
        has_rm = "rm_scores" in data.batch.keys()  # noqa: SIM118 (a TensorDict has no `in`)
        rm_batch = data.batch["rm_scores"].tolist() if has_rm else None
        probed = [float(v) for v in data.non_tensor_batch.get("probe", [])]
    except Exception as exc:
        raise VerlInternalsChanged(f"probing AgentLoopWorker._postprocess failed: {exc!r}") from exc
    _expect(
        rm_batch == [[0.0, 0.25, 0.0]],
        f"AgentLoopWorker._postprocess wrote rm_scores={rm_batch} for a reward of 0.25 on 2 of "
        "3 response tokens, not the reward on the last valid token",
    )
    _expect(probed == [1.0], "AgentLoopWorker._postprocess drops reward_extra_info")

    score = _original(worker_cls._compute_score)
    _expect(
        _params(score) == ["self", "outputs", "kwargs"],
        f"AgentLoopWorker._compute_score{inspect.signature(score)}",
    )
    source = inspect.getsource(score)
    for line in (
        'final_output.reward_score = result["reward_score"]',
        'final_output.extra_fields["reward_extra_info"] = result["reward_extra_info"]',
    ):
        _expect(line in source, f"AgentLoopWorker._compute_score no longer does `{line}`")
    if v1_module is not None:
        tq_post = v1_module.AgentLoopWorkerTQ._agent_loop_postprocess
        _expect(
            "output.as_dict()" in inspect.getsource(tq_post),
            "AgentLoopWorkerTQ._agent_loop_postprocess no longer builds its fields with "
            "AgentLoopOutput.as_dict()",
        )


def _wrap_as_dict(original: Callable[[Any], dict[str, Any]]) -> Callable[[Any], dict[str, Any]]:
    @functools.wraps(original)
    def as_dict(self: Any) -> dict[str, Any]:
        out = original(self)
        info = (out.get("extra_fields") or {}).get("reward_extra_info") or {}
        placed = placement_of(info)
        rm = out.get("rm_scores")
        if placed and isinstance(rm, torch.Tensor):
            _check_length(int(rm.shape[0]), info)
            write_stage_rewards(rm, placed)
        return out

    setattr(as_dict, SHIM_MARK, True)
    return as_dict


def _wrap_postprocess(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def _postprocess(
        self: Any,
        inputs: Any,
        input_non_tensor_batch: Any = None,
        validate: bool = False,
        **kwargs: Any,
    ) -> Any:
        data = original(
            self, inputs, input_non_tensor_batch=input_non_tensor_batch, validate=validate, **kwargs
        )
        non_tensor = data.non_tensor_batch
        has_rm = "rm_scores" in data.batch.keys()  # noqa: SIM118 (a TensorDict has no `in`)
        if not has_rm or STAGE_CREDIT_KEY not in non_tensor:
            return data
        rm_scores = data.batch["rm_scores"]
        prompt_length = data.batch["prompts"].size(1)
        lengths = data.batch["attention_mask"][:, prompt_length:].sum(dim=1).tolist()
        keys = (STAGE_CREDIT_KEY, STAGE_LEN_KEY, *STAGE_END_KEYS, *(f"R_{s}" for s in STAGES))
        for i in range(len(data)):
            info = {k: non_tensor[k][i] for k in keys}
            placed = placement_of(info)
            if placed:
                _check_length(int(lengths[i]), info)
                write_stage_rewards(rm_scores[i], placed)
        return data

    setattr(_postprocess, SHIM_MARK, True)
    return _postprocess


def _check_length(length: int, info: Mapping[str, Any]) -> None:
    expected = int(info[STAGE_LEN_KEY])
    if length != expected:
        raise ValueError(
            f"rubricate stage credit: an agent-loop output of {length} response tokens carries "
            f"stage rewards for {expected} tokens: agent loops that return several outputs per "
            "trajectory (only the last one is scored) are not supported with stage credit; set "
            "RUBRICATE_STAGE_CREDIT=off"
        )


def install_streamed_stage_credit(module: Any = None, v1_module: Any = None) -> bool:
    """Wrap veRL's streamed reward writers (after `check_streamed_internals`). False where
    this process has no agent loop (e.g. a reward worker whose environment lacks its
    dependencies): nothing there writes streamed rewards."""
    if module is None:
        try:
            module = importlib.import_module(STREAMED_MODULE)
        except ImportError as exc:
            logger.info("rubricate stage credit: no veRL agent loop here (%s)", exc)
            return False
        try:
            v1_module = importlib.import_module(V1_MODULE)
        except ImportError:
            v1_module = None
    check_streamed_internals(module, v1_module)
    output_cls, worker_cls = module.AgentLoopOutput, module.AgentLoopWorker
    if not getattr(output_cls.as_dict, SHIM_MARK, False):
        output_cls.as_dict = _wrap_as_dict(output_cls.as_dict)
    if not getattr(worker_cls._postprocess, SHIM_MARK, False):
        worker_cls._postprocess = _wrap_postprocess(worker_cls._postprocess)
    _announce(
        "rubricate stage credit: on (veRL: streamed through AgentLoopOutput.as_dict and "
        "AgentLoopWorker._postprocess, after the rollout through "
        "RubricateRewardManager.assemble_rm_scores; estimator rubricate_ssgrpo)"
    )
    return True


if StageCredit.from_env().enabled:
    install_streamed_stage_credit()
