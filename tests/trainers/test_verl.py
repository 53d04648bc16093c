"""veRL 0.9.1's own reward loop (`RewardLoopWorker`, one `run_single` per sample) with the
`rubricate` reward manager from veRL's registry, against a real gateway; then the manager's
`assemble_rm_scores` and the `rubricate_ssgrpo` estimator from veRL's registry; the streamed
path (veRL's default without a reward model) through veRL's agent-loop code with the
stage-credit shim, checked against advantages computed here from the stage scores; and the
shim refusing a changed veRL."""

import math
import re
from pathlib import Path
from typing import Any

import pytest

from rubricate_client.constants import DEFAULT_LAMBDA
from rubricate_client.ssgrpo import stage_advantages, stage_returns
from rubricate_client.stages import stage_spans
from rubricate_client.tokens import token_ranges
from tests.support.gateway import Running
from tests.trainers.conftest import driver

N = 4
STAGE_ENDS = ("stage_end_plan", "stage_end_research", "stage_end_review", "stage_end_answer")


def generation_groups(running: Running) -> list[set[str]]:
    """The trajectories' markers in each rubric-generation call (one call per scored group)."""
    return [
        set(re.findall(r"final ([a-h]) ", user))
        for schema, user in running.backend.calls
        if schema == "stage_rubrics"
    ]


async def test_verl_reward_loop_scores_each_group_once_and_credits_stage_tokens(
    running: Running, tmp_path: Path
) -> None:
    out = await driver("verl", "verl_driver.py", running.platform.urls["gateway"], str(tmp_path))

    assert out["manager"] == "RubricateRewardManager"
    # identical reward_extra_info keys for every sample (veRL builds arrays from the first)
    assert len(out["key_sets"]) == 1
    assert set(STAGE_ENDS) <= set(out["key_sets"][0])
    assert out["extra"]["scored"] == [1.0] * 2 * N
    assert out["extra"]["group_size"] == [float(N)] * 2 * N
    assert out["extra"]["partial_group"] == [0.0] * 2 * N

    # the gateway gathered the one-sample requests: each group scored once, at full size
    groups = generation_groups(running)
    assert sorted(map(sorted, groups)) == [list("abcd"), list("efgh")]

    # each stage's reward is marked on the stage's last response token: R_plan, then each
    # stage's increment, so the running sums are the R_k and the total is R_answer
    for i, placed in enumerate(out["rm_marked"]):
        ends = [int(out["extra"][k][i]) for k in STAGE_ENDS]
        assert ends == sorted(ends) and min(ends) >= 0
        assert [j for j, _ in placed] == ends
        mask = out["response_mask"][i]
        assert ends[-1] == sum(mask) - 1
        running = [sum(v for _, v in placed[: k + 1]) for k in range(4)]
        stages = [out["extra"][f"R_{s}"][i] for s in ("plan", "research", "review", "answer")]
        assert running == pytest.approx(stages, abs=1e-6)
        assert abs(running[-1] - out["scores"][i]) < 1e-6

    # SS-GRPO: per-stage advantages, normalized per group; constant over each stage's tokens
    for i in range(2 * N):
        ends = [int(out["extra"][k][i]) for k in STAGE_ENDS]
        adv = out["advantages"][i]
        start = 0
        for end in ends:
            assert len({round(a, 6) for a in adv[start : end + 1]}) == 1
            start = end + 1
        assert all(a == 0.0 for a in adv[sum(out["response_mask"][i]) :])
    for g in range(2):
        rows = range(g * N, (g + 1) * N)
        for k in STAGE_ENDS:
            stage = [out["advantages"][i][int(out["extra"][k][i])] for i in rows]
            assert abs(sum(stage)) < 1e-4
    # the fake judge: sample a [[excellent]], b and e [[poor]], the others in between
    first = [out["advantages"][i][int(out["extra"]["stage_end_plan"][i])] for i in range(2 * N)]
    assert first[0] > 0 > first[1] and first[4] < 0 < first[5]
    assert out["scores"][0] > out["scores"][2] > out["scores"][1]
    # on veRL's scalar layout (its streamed path) the estimator is GRPO on R_answer
    assert out["scalar_spread"] > 0 and out["scalar_vs_grpo"] < 1e-5
    assert out["kl_refused"]


@pytest.mark.parametrize("function", ["compute_score", "compute_score_async"])
async def test_verl_reward_function_in_the_naive_manager_scores_whole_groups(
    running: Running, tmp_path: Path, function: str
) -> None:
    out = await driver(
        "verl", "verl_driver.py", running.platform.urls["gateway"], str(tmp_path), function
    )
    assert out["manager"] == "NaiveRewardManager"
    assert out["extra"]["scored"] == [1.0] * 2 * N
    assert out["extra"]["group_size"] == [float(N)] * 2 * N
    assert out["extra"]["partial_group"] == [0.0] * 2 * N
    assert len(out["extra"]["R_answer"]) == 2 * N
    groups = generation_groups(running)
    assert sorted(map(sorted, groups)) == [list("abcd"), list("efgh")]


# ------------------------------------------------ the streamed path (veRL's default) and the shim

STAGE_NAMES = ("plan", "research", "review", "answer")
ANSWER_ONLY = {"d": "fallback: the judge scored its answer only", "e": "no review stage"}
"""The other samples (a, b, c, f, g, h) have four stages found and scored."""


def word_offsets(tokens: list[str]) -> list[tuple[int, int]]:
    """Character offsets of word-level tokens in their decoding (joined by one space)."""
    out, at = [], 0
    for token in tokens:
        start = at + 1 if out else 0
        out.append((start, start + len(token)))
        at = start + len(token)
    return out


def grpo_on_answer(scores: list[float], group: list[int]) -> dict[int, float]:
    """veRL's GRPO of one group from the scalar R_answer: (r − mean) / (std + 1e-6), std with
    Bessel's correction (torch.std)."""
    values = [scores[i] for i in group]
    mean = sum(values) / len(values)
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
    return {i: (scores[i] - mean) / (std + 1e-6) for i in group}


def check_path(out: dict[str, Any], tokens: list[list[str]], *, credit: bool) -> None:
    extra, mask = out["extra"], out["response_mask"]
    n = len(tokens)
    markers = [t[t.index("</structured_plan>") - 1] for t in tokens]
    assert markers == list("abcdefgh")
    scores = [e["score"] for e in extra]
    rows: list[list[float | None]] = []
    ranges: list[dict[str, tuple[int, int] | None]] = []
    for i in range(n):
        text = " ".join(tokens[i])
        found = token_ranges(
            word_offsets(tokens[i]), {str(s): span for s, span in stage_spans(text).items()}
        )
        ranges.append(found)
        ends = [-1 if found[s] is None else found[s][1] - 1 for s in STAGE_NAMES]
        assert [int(extra[i][k]) for k in STAGE_ENDS] == ends
        assert extra[i]["stage_response_len"] == len(tokens[i])
        marked = [
            j
            for j, (v, neg) in enumerate(zip(out["rm_scores"][i], out["signbits"][i], strict=True))
            if v != 0 or neg
        ]
        if credit and markers[i] not in ANSWER_ONLY:
            assert extra[i]["stage_credit"] == 1.0 and extra[i]["fallback"] == 0.0
            stage_scores = [extra[i][f"R_{s}"] for s in STAGE_NAMES]
            rows.append(list(stage_scores))
            # the stage rewards on the stage ends: running sums R_k, total R_answer
            assert marked == ends
            running = [sum(out["rm_scores"][i][j] for j in ends[: k + 1]) for k in range(4)]
            assert running == pytest.approx(stage_scores, abs=1e-6)
        else:
            assert extra[i]["stage_credit"] == 0.0
            rows.append([None, None, None, scores[i]])
            # veRL's own layout: the scalar on the last response token (a 0.0 marks nothing)
            assert marked == ([len(tokens[i]) - 1] if scores[i] != 0.0 else [])
            assert out["rm_scores"][i][-1] == pytest.approx(scores[i], abs=1e-6)
        assert sum(out["rm_scores"][i]) == pytest.approx(scores[i], abs=1e-6)
    assert extra[3]["fallback"] == 1.0 and extra[4]["stage_end_review"] == -1.0

    groups = [list(range(0, 4)), list(range(4, 8))]
    grpo: dict[int, float] = {}
    for group in groups:
        grpo.update(grpo_on_answer(scores, group))
    for i in range(n):
        # veRL's own GRPO on this layout is GRPO on R_answer: the token rewards sum to it
        assert out["grpo"][i] == pytest.approx([grpo[i] * m for m in mask[i]], abs=1e-5)
    if not credit:
        assert out["advantages"] == out["grpo"]  # exactly veRL's own GRPO
        return
    for group in groups:
        expected = stage_advantages(stage_returns([rows[i] for i in group], lam=DEFAULT_LAMBDA))
        for i, adv in zip(group, expected, strict=True):
            got = out["advantages"][i]
            if markers[i] in ANSWER_ONLY:
                a_answer = adv[3]
                assert a_answer is not None
                assert got == pytest.approx([a_answer * m for m in mask[i]], abs=1e-5)
                continue
            for k, stage in enumerate(STAGE_NAMES):
                found = ranges[i][stage]
                assert found is not None
                a_k = adv[k]
                assert a_k is not None
                for t in range(*found):  # masked tool output: no loss, so 0
                    assert got[t] == pytest.approx(a_k * mask[i][t], abs=1e-5), (i, stage, t)
            assert sum(1 for m in mask[i] if m == 0) == 3  # the tool output
    # per stage, not one value per response: `a` gets a different advantage on its plan than
    # on its answer
    assert out["advantages"][0][0] != pytest.approx(out["advantages"][0][-1])


@pytest.mark.parametrize("credit", ["on", "off"])
async def test_verl_streamed_reward_loop_puts_ss_grpo_advantages_on_each_stage(
    running: Running, tmp_path: Path, credit: str
) -> None:
    """veRL's streamed reward path (agent loop → reward loop worker → rm_scores → estimator),
    in the v1 trainer's layout and in the legacy trainer's, with stage credit on and off."""
    out = await driver(
        "verl",
        "verl_streamed_driver.py",
        running.platform.urls["gateway"],
        str(tmp_path),
        env={"RUBRICATE_STAGE_CREDIT": credit},
    )
    assert out["manager"] == "RubricateRewardManager"
    assert out["shim"] is (credit == "on")
    assert any(
        line.startswith(f"rubricate stage credit: {credit} (veRL rubricate_ssgrpo)")
        for line in out["log_lines"]
    ), out["log_lines"]
    for path in ("v1", "legacy"):
        check_path(out[path], out["tokens"], credit=credit == "on")
    # the gateway gathered each path's one-sample requests into its two groups, scored once
    groups = sorted(map(sorted, generation_groups(running)))
    assert groups == [list("abcd")] * 2 + [list("efgh")] * 2


CHANGES = (
    "postprocess_signature",
    "postprocess_layout",
    "as_dict_layout",
    "as_dict_signature",
    "compute_score_extra_info",
)


async def test_verl_stage_credit_shim_refuses_a_changed_verl(tmp_path: Path) -> None:
    """Each change to veRL's streamed reward path (a signature, where the reward lands, where
    its extra info goes) makes the shim raise `VerlInternalsChanged`, at install and at
    import, and leaves veRL's function unwrapped; veRL as installed passes."""
    out = await driver("verl", "verl_changed_driver.py")
    assert out["unchanged"] is None
    for change in CHANGES:
        error = out[change]
        assert error is not None, change
        assert error["type"] == "VerlInternalsChanged", error
        assert "RUBRICATE_STAGE_CREDIT=off" in error["message"]
        assert out[f"{change}_wrapped"] is False
    assert out["import"] is not None and out["import"]["type"] == "VerlInternalsChanged"
    assert out["installed_after"] is True and out["wrapped_after"] is True


# ------------------------------------------------------------------ GDPO (veRL's gdpo estimator)


def verl_gdpo(
    components: list[list[float]], uid: list[str], lengths: list[int], weights: list[float]
) -> list[float]:
    """veRL 0.9.1's `gdpo` estimator written out for outcome rewards: each component
    normalized per group ((x − mean) / (Bessel std + 1e-6)), weighted and summed per sample,
    then whitened over every response token (token-weighted mean, Bessel variance over the
    tokens, rsqrt(var + 1e-8)). One value per sample (its tokens all get it)."""
    n = len(components)
    summed = [0.0] * n
    for k, w in enumerate(weights):
        for group in set(uid):
            members = [i for i in range(n) if uid[i] == group]
            values = [components[i][k] for i in members]
            mean = sum(values) / len(values)
            std = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
            for i in members:
                summed[i] += w * (components[i][k] - mean) / (std + 1e-6)
    total = sum(lengths)
    mean = sum(s * n_tok for s, n_tok in zip(summed, lengths, strict=True)) / (total + 1e-8)
    var = sum(n_tok * (s - mean) ** 2 for s, n_tok in zip(summed, lengths, strict=True))
    var = var / (total + 1e-8) * total / (total - 1)
    return [(s - mean) / math.sqrt(var + 1e-8) for s in summed]


async def test_verl_gdpo_estimator_over_stage_components(running: Running, tmp_path: Path) -> None:
    """veRL's own `gdpo` reward manager and estimator over the stage components that
    `compute_score` returns: every token's advantage is the one computed here from the
    gateway's stage scores and Λ's weights, and it is not GRPO on R_answer."""
    out = await driver(
        "verl", "verl_gdpo_driver.py", running.platform.urls["gateway"], str(tmp_path)
    )
    assert out["manager"] == "GDPORewardManager"
    assert out["weights"] == [1.0, 1.4, 2.0, 3.4]
    extra = out["extra"]
    assert extra["scored"] == [1.0] * 2 * N
    assert sorted(map(sorted, generation_groups(running))) == [list("abcd"), list("efgh")]
    keys = [f"R_{s}" for s in STAGE_NAMES]
    rows = [[extra[k][i] for k in keys] for i in range(2 * N)]
    # the components: the stage scores; `d`, scored on its answer only, has R_answer on every
    # stage (the platform's broadcast), flagged by `fallback`
    assert rows[0] == [1.0, 1.0, 1.0, 1.0] and rows[1] == [0.0, 0.0, 0.0, 0.0]
    assert extra["fallback"][3] == 1.0 and rows[3] == [rows[3][3]] * 4
    assert rows[6][2] == 0.0 and rows[6][3] == 0.5  # g: no review stage
    assert [r[3] for r in rows] == out["scores"]  # the scalar stays R_answer
    mask = out["response_mask"]
    lengths = [sum(m) for m in mask]
    expected = verl_gdpo(rows, out["uid"], lengths, out["weights"])
    for i, (adv, m) in enumerate(zip(out["advantages"], mask, strict=True)):
        got = [a for a, keep in zip(adv, m, strict=True) if keep]
        assert got == pytest.approx([expected[i]] * lengths[i], abs=1e-4), i
        assert all(a == 0.0 for a, keep in zip(adv, m, strict=True) if not keep)
    # GRPO on R_answer alone (per group, then whitened the same way) differs: `g`'s missing
    # review counts with the decoupled normalization and Λ's weights
    answer_only = verl_gdpo([[r[3]] for r in rows], out["uid"], lengths, [1.0])
    assert expected != pytest.approx(answer_only, abs=1e-3)
