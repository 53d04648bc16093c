"""veRL 0.9.1 driver (run in .venvs/verl): the stage-credit shim meets a veRL whose streamed
reward path has changed, one change at a time, and must refuse with `VerlInternalsChanged`
(at install, and so at `import verl` with VERL_USE_EXTERNAL_MODULES), never wrap it and
train plain GRPO unnoticed. Each change replaces one of veRL's functions in this process
with a variant a later veRL could ship; the original is put back after. Prints one JSON
object: per change, the error the shim raised (its type and message) or null.

usage: python verl_changed_driver.py
"""

import importlib
import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

os.environ["RUBRICATE_STAGE_CREDIT"] = "off"  # import without the shim; installed below
os.environ.setdefault("VERL_USE_EXTERNAL_MODULES", "rubricate_client.verl_manager")

import verl  # noqa: F401
from verl.experimental.agent_loop import agent_loop

import rubricate_client.verl_manager as manager


@contextmanager
def replaced(owner: Any, name: str, value: Any) -> Iterator[None]:
    original = owner.__dict__[name]
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, original)


def postprocess_with_a_new_parameter() -> Callable[..., Any]:
    """`_postprocess` takes a new argument that says where the reward goes."""
    original = agent_loop.AgentLoopWorker._postprocess

    def _postprocess(
        self: Any,
        inputs: Any,
        input_non_tensor_batch: Any = None,
        validate: bool = False,
        reward_position: str = "last",
    ) -> Any:
        return original(self, inputs, input_non_tensor_batch, validate)

    return _postprocess


def postprocess_writing_the_reward_first() -> Callable[..., Any]:
    """Same signature, but the reward lands on the first response token."""
    original = agent_loop.AgentLoopWorker._postprocess

    def _postprocess(
        self: Any, inputs: Any, input_non_tensor_batch: Any = None, validate: bool = False
    ) -> Any:
        data = original(self, inputs, input_non_tensor_batch, validate)
        rm = data.batch["rm_scores"]
        total = rm.sum(dim=1)
        rm.zero_()
        rm[:, 0] = total
        return data

    return _postprocess


def as_dict_writing_the_reward_first() -> Callable[..., Any]:
    """`AgentLoopOutput.as_dict` puts the reward on the first response token."""
    original = agent_loop.AgentLoopOutput.as_dict

    def as_dict(self: Any) -> dict[str, Any]:
        out: dict[str, Any] = original(self)
        if "rm_scores" in out:
            total = out["rm_scores"].sum()
            out["rm_scores"].zero_()
            out["rm_scores"][0] = total
        return out

    return as_dict


def as_dict_taking_an_argument() -> Callable[..., Any]:
    original = agent_loop.AgentLoopOutput.as_dict

    def as_dict(self: Any, pad_to: int | None = None) -> dict[str, Any]:
        out: dict[str, Any] = original(self)
        return out

    return as_dict


def compute_score_storing_elsewhere() -> Callable[..., Any]:
    """`_compute_score` keeps the reward's extra info under another key."""

    async def _compute_score(self: Any, outputs: Any, kwargs: dict[str, Any]) -> None:
        final_output = outputs[-1]
        result = await self.reward_loop_worker_handles[0].compute_score.remote(None)
        final_output.reward_score = result["reward_score"]
        final_output.extra_fields["reward_info"] = result["reward_extra_info"]

    return _compute_score


CHANGES: dict[str, tuple[Any, str, Callable[[], Any]]] = {
    "postprocess_signature": (
        agent_loop.AgentLoopWorker,
        "_postprocess",
        postprocess_with_a_new_parameter,
    ),
    "postprocess_layout": (
        agent_loop.AgentLoopWorker,
        "_postprocess",
        postprocess_writing_the_reward_first,
    ),
    "as_dict_layout": (agent_loop.AgentLoopOutput, "as_dict", as_dict_writing_the_reward_first),
    "as_dict_signature": (agent_loop.AgentLoopOutput, "as_dict", as_dict_taking_an_argument),
    "compute_score_extra_info": (
        agent_loop.AgentLoopWorker,
        "_compute_score",
        compute_score_storing_elsewhere,
    ),
}


def attempt(action: Callable[[], Any]) -> dict[str, str] | None:
    try:
        action()
    except Exception as exc:
        return {"type": type(exc).__name__, "message": str(exc)}
    return None


def main() -> None:
    out: dict[str, Any] = {}
    # veRL as installed: the checks pass, and installing wraps both writers
    out["unchanged"] = attempt(lambda: manager.check_streamed_internals(agent_loop))
    for name, (owner, attribute, make) in CHANGES.items():
        with replaced(owner, attribute, make()):
            out[name] = attempt(lambda: manager.install_streamed_stage_credit(agent_loop))
            out[f"{name}_wrapped"] = bool(getattr(getattr(owner, attribute), manager.SHIM_MARK, 0))
    # the same refusal when the module is imported with stage credit on (what
    # VERL_USE_EXTERNAL_MODULES does when `import verl` runs in each veRL process)
    os.environ["RUBRICATE_STAGE_CREDIT"] = "on"
    owner, attribute, make = CHANGES["as_dict_layout"]
    with replaced(owner, attribute, make()):
        out["import"] = attempt(lambda: importlib.reload(manager))
    out["installed_after"] = manager.install_streamed_stage_credit(agent_loop)
    out["wrapped_after"] = bool(
        getattr(agent_loop.AgentLoopOutput.as_dict, manager.SHIM_MARK, False)
        and getattr(agent_loop.AgentLoopWorker._postprocess, manager.SHIM_MARK, False)
    )
    print(json.dumps(out))


if __name__ == "__main__":
    main()
