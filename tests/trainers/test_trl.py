"""TRL 1.16's `GRPOTrainer.train()` with `RubricateReward` against a real gateway, in one
process and in two (torchrun), where one prompt's completions are split across ranks; and
`StagewiseGRPOTrainer.train()`, whose loss gets each stage's SS-GRPO advantage on the stage's
tokens, checked against advantages computed here from the platform's stage scores."""

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

from rubricate_client.constants import DEFAULT_LAMBDA, STAGES
from rubricate_client.ssgrpo import stage_advantages, stage_returns
from rubricate_client.stagecredit import component_weights
from rubricate_client.stages import stage_spans
from rubricate_client.tokens import token_ranges
from tests.support.gateway import Running
from tests.trainers.conftest import driver

N = 4
STEPS = 2


def generation_sizes(running: Running) -> list[int]:
    """The number of trajectories in each rubric-generation call (one call per group)."""
    return [
        len(re.findall(r'<untrusted trajectory="\d+">', user))
        for schema, user in running.backend.calls
        if schema == "stage_rubrics"
    ]


@pytest.mark.parametrize("processes", [1, 2])
async def test_trl_grpo_trains_with_whole_groups(
    running: Running, tmp_path: Path, processes: int
) -> None:
    launcher: tuple[str, ...] = ()
    if processes > 1:
        launcher = ("-m", "torch.distributed.run", "--nproc_per_node", str(processes))
    out = await driver(
        "trl",
        "trl_driver.py",
        running.platform.urls["gateway"],
        str(tmp_path),
        str(N // processes),
        launcher=launcher,
        env={"OMP_NUM_THREADS": "1"},
    )
    assert out["global_step"] == STEPS
    assert out["world_size"] == processes
    # one prompt of N completions per step: each step's group scored once, with all N
    sizes = generation_sizes(running)
    assert sizes == [N] * STEPS, running.backend.calls
    # per-stage scores and the scored/fallback flags through TRL's `log_metric`, every step
    logged = [e for e in out["log_history"] if "rubricate/scored" in e]
    assert len(logged) == STEPS
    for entry in logged:
        for key in ("rubricate/scored", "rubricate/fallback", "rubricate/R_answer"):
            assert 0.0 <= entry[key] <= 1.0
        assert entry["rubricate/group_size"] == N and entry["rubricate/partial_group"] == 0.0


# ------------------------------------------------------------------ StagewiseGRPOTrainer

CREDITED = {"a", "b", "c", "f", "h"}
"""Completions whose four stages were found and scored: per-stage credit."""
ANSWER_ONLY = {"d": "fallback: the judge scored its answer only", "e": "no review stage"}
UNSCORED = {"g"}
"""The fake judge's `[[fail-all]]`: the platform could not score it (reward None)."""
EOS = "</s>"


def offsets_of_words(tokens: list[str]) -> list[tuple[int, int]]:
    """Character offsets of word-level tokens in their decoding (words joined by a space);
    special tokens (skipped when decoding) have empty offsets."""
    out, at = [], 0
    for token in tokens:
        if token == EOS:
            out.append((at, at))
            continue
        start = at if not out or at == 0 else at + 1
        out.append((start, start + len(token)))
        at = start + len(token)
    return out


def marker_of(tokens: list[str]) -> str:
    return tokens[tokens.index("</structured_plan>") - 1]


def load_groups(folder: Path, processes: int) -> dict[int, list[dict[str, Any]]]:
    """Per step, the group's completions in TRL's gather order (rank-major)."""
    steps: dict[int, list[dict[str, Any]]] = {}
    for rank in range(processes):
        data = json.loads((folder / f"records-{rank}.json").read_text())
        for record in data["records"]:
            for i, tokens in enumerate(record["tokens"]):
                steps.setdefault(record["step"], []).append(
                    {
                        "rank": rank,
                        "tokens": tokens,
                        "advantages": record["advantages"][i],
                        "reward": record["rewards"][i],
                        "logs": {k: v[i] for k, v in record["extra_logs"].items()},
                    }
                )
    return steps


@pytest.mark.parametrize("processes", [1, 2])
async def test_trl_stagewise_trainer_gives_each_stage_its_ss_grpo_advantage(
    running: Running, tmp_path: Path, processes: int
) -> None:
    launcher: tuple[str, ...] = ()
    if processes > 1:
        launcher = ("-m", "torch.distributed.run", "--nproc_per_node", str(processes))
    out = await driver(
        "trl",
        "trl_driver.py",
        running.platform.urls["gateway"],
        str(tmp_path),
        str(N // processes),
        "stagewise",
        launcher=launcher,
        env={"OMP_NUM_THREADS": "1"},
    )
    assert out["global_step"] == STEPS and out["world_size"] == processes
    assert any(
        line.startswith("rubricate stage credit: on (TRL StagewiseGRPOTrainer)")
        for line in out["log_lines"]
    ), out["log_lines"]
    assert generation_sizes(running) == [N] * STEPS  # each group scored once, whole
    steps = load_groups(tmp_path, processes)
    assert sorted(steps) == [0, 1]
    seen: set[str] = set()
    for group in steps.values():
        assert len(group) == N
        assert sorted(c["rank"] for c in group) == sorted(
            r for r in range(processes) for _ in range(N // processes)
        )
        # the stage scores, independently: the gateway's per-stage scores of the credited
        # completions, R_answer alone for the answer-only ones, nothing for the unscored
        rows: list[list[float | None]] = []
        for c in group:
            marker = marker_of(c["tokens"])
            seen.add(marker)
            if marker in CREDITED:
                assert c["logs"]["rubricate/scored"] == 1.0
                assert c["logs"]["rubricate/fallback"] == 0.0
                rows.append([c["logs"][f"rubricate/R_{s}"] for s in STAGES])
            elif marker in ANSWER_ONLY:
                assert c["reward"] is not None
                rows.append([None, None, None, c["reward"]])
            else:
                assert marker in UNSCORED and c["reward"] is None
                assert c["logs"]["rubricate/scored"] == 0.0
                rows.append([None] * 4)
        expected = stage_advantages(stage_returns(rows, lam=DEFAULT_LAMBDA))
        for c, adv in zip(group, expected, strict=True):
            tokens, got = c["tokens"], c["advantages"]
            assert len(got) >= len(tokens)
            assert all(v == 0.0 for v in got[len(tokens) :])  # padding
            marker = marker_of(tokens)
            if marker in CREDITED:
                text = " ".join(t for t in tokens if t != EOS)
                spans = {str(s): span for s, span in stage_spans(text).items()}
                ranges = token_ranges(offsets_of_words(tokens), spans)
                covered = 0
                for k, stage in enumerate(STAGES):
                    found = ranges[stage]
                    assert found is not None, (marker, stage)
                    a_k = adv[k]
                    assert a_k is not None
                    for t in range(*found):
                        assert got[t] == pytest.approx(a_k, abs=1e-5), (marker, stage, t)
                    covered += found[1] - found[0]
                assert covered == len(tokens) - 1  # every word is in a stage; EOS ends it
                assert got[len(tokens) - 1] == pytest.approx(adv[3], abs=1e-5)
            elif marker in ANSWER_ONLY:
                a_answer = adv[3]
                assert a_answer is not None
                assert got[: len(tokens)] == pytest.approx([a_answer] * len(tokens), abs=1e-5)
            else:  # unscored: no learning signal, no made-up reward
                assert got[: len(tokens)] == [0.0] * len(tokens)
    assert seen == CREDITED | set(ANSWER_ONLY) | UNSCORED
    # the credit is per stage, not one value per completion: `a` ([[excellent]]) gets a
    # different advantage on its plan than on its answer (Λ and the answer-only rows)
    first = next(c for c in steps[0] if marker_of(c["tokens"]) == "a")
    assert first["advantages"][0] != pytest.approx(first["advantages"][len(first["tokens"]) - 1])
    logged = [e for e in out["log_history"] if "rubricate/stage_credited" in e]
    assert [e["rubricate/stage_credited"] for e in logged] == [0.75, 0.5]


def trl_grpo(rewards: list[float | None]) -> list[float]:
    """TRL 1.16's GRPO advantage of one group (`scale_rewards="group"`): (r − mean) /
    (std + 1e-4) with NaN-aware mean and Bessel-corrected std over the scored completions; an
    unscored completion gets 0."""
    scored = [r for r in rewards if r is not None]
    mean = sum(scored) / len(scored)
    std = math.sqrt(sum((r - mean) ** 2 for r in scored) / (len(scored) - 1))
    return [0.0 if r is None else (r - mean) / (std + 1e-4) for r in rewards]


async def test_trl_stagewise_trainer_with_stage_credit_off_is_trl_grpo(
    running: Running, tmp_path: Path
) -> None:
    out = await driver(
        "trl",
        "trl_driver.py",
        running.platform.urls["gateway"],
        str(tmp_path),
        str(N),
        "stagewise-off",
        env={"OMP_NUM_THREADS": "1"},
    )
    assert out["global_step"] == STEPS
    assert any(
        line.startswith("rubricate stage credit: off (TRL StagewiseGRPOTrainer)")
        for line in out["log_lines"]
    ), out["log_lines"]
    for group in load_groups(tmp_path, 1).values():
        rewards = [c["reward"] for c in group]
        expected = trl_grpo(rewards)
        # TRL's own advantages: one number per completion, broadcast by TRL's loss
        assert [c["advantages"] for c in group] == pytest.approx(expected, abs=1e-5)


# ------------------------------------------------------------------ components (GDPO)


def trl_normalize_then_sum(rows: list[list[float | None]], weights: list[float]) -> list[float]:
    """TRL 1.16's `multi_objective_aggregation="normalize_then_sum"` for one group that is
    the whole batch, written out here: each component normalized within the group over the
    completions that have it ((x − mean) / (Bessel std + 1e-4)), weighted and summed over
    the components a completion has, then normalized over the batch; a completion with no
    component at all gets 0."""

    def stats(values: list[float]) -> tuple[float, float | None]:
        mean = sum(values) / len(values)
        if len(values) < 2:
            return mean, None
        return mean, math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))

    k = len(weights)
    normed: list[list[float | None]] = [[None] * k for _ in rows]
    for j in range(k):
        present = [v for r in rows if (v := r[j]) is not None]
        if not present:
            continue
        mean, std = stats(present)
        for i, r in enumerate(rows):
            value = r[j]
            if value is not None and std is not None:
                normed[i][j] = (value - mean) / (std + 1e-4)
    sums: list[float | None] = []
    for r, n in zip(rows, normed, strict=True):
        if all(v is None for v in r):
            sums.append(None)
        else:
            sums.append(sum(w * v for w, v in zip(weights, n, strict=True) if v is not None))
    present_sums = [s for s in sums if s is not None]
    mean, std = stats(present_sums)
    assert std is not None
    return [0.0 if s is None else (s - mean) / (std + 1e-4) for s in sums]


async def test_trl_normalize_then_sum_over_stage_components(
    running: Running, tmp_path: Path
) -> None:
    """TRL's own GRPOTrainer, one reward function per stage component, decoupled
    normalization: each completion's advantage is the one computed here from the gateway's
    components and Λ's weights; nulls (fallback stages, the unscored completion) stay out."""
    out = await driver(
        "trl",
        "trl_driver.py",
        running.platform.urls["gateway"],
        str(tmp_path),
        str(N),
        "components",
        env={"OMP_NUM_THREADS": "1"},
    )
    assert out["global_step"] == STEPS
    assert any(line.startswith("rubricate stage credit: components") for line in out["log_lines"])
    assert generation_sizes(running) == [N] * STEPS  # one /get_reward per batch, whole groups
    weights = list(component_weights())
    assert weights == [1.0, 1.4, 2.0, 3.4]
    records = json.loads((tmp_path / "records-0.json").read_text())["records"]
    assert [r["step"] for r in records] == [0, 1]
    seen: dict[str, list[float | None]] = {}
    differs = []
    for record in records:
        comps = record["components"]
        assert list(comps) == [f"R_{s}" for s in STAGES]
        rows = [[comps[f"R_{s}"][i] for s in STAGES] for i in range(N)]
        for i, tokens in enumerate(record["tokens"]):
            seen[marker_of(tokens)] = rows[i]
        expected = trl_normalize_then_sum(rows, weights)
        assert record["advantages"] == pytest.approx(expected, abs=1e-4)
        differs.append(record["advantages"] != pytest.approx(trl_grpo(record["rewards"]), abs=1e-3))
    # not the scalar's GRPO where the stages disagree (step 1: `e` has no review stage)
    assert differs == [False, True]
    assert seen["a"] == [1.0, 1.0, 1.0, 1.0] and seen["b"] == [0.0, 0.0, 0.0, 0.0]
    assert seen["d"][:3] == [None, None, None] and seen["d"][3] is not None  # fallback
    assert seen["e"][2] == 0.0  # a missing review: the platform's missing-stage score
    assert seen["g"] == [None, None, None, None]  # unscored: no component, never 0
    logged = [e for e in out["log_history"] if "rewards/rubricate_R_plan/mean" in e]
    assert len(logged) == STEPS
