"""`POST /get_reward`, the OpenRLHF remote reward-model protocol, over raw HTTP: the exact wire
format, grouping by question, labels, flagged (not silent) failures and 4xx on bad batches."""

import json
from typing import Any

import pytest
from prometheus_client import REGISTRY

from rubricate.common.errors import ServiceError
from rubricate.rewards.gateway.service import (
    RewardCapabilities,
    TrainerRewards,
    stagewise_rewards,
)
from rubricate_client.schemas.rewards import GetRewardRequest
from tests.support.gateway import Running, trajectory

PROMPT = "<|user|>Why was the Mars Climate Orbiter lost?<|assistant|>"


def batch(*markers: str, labels: list[Any] | None = None, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "query": [PROMPT + trajectory(m) for m in markers],
        "prompts": [PROMPT] * len(markers),
        **extra,
    }
    if labels is not None:
        body["labels"] = labels
    return body


async def test_openrlhf_wire_format_and_stagewise_answer_score(running: Running) -> None:
    label = json.dumps({"question": "Why was the orbiter lost?", "question_id": "mco-1"})
    response = await running.client.post(
        "/get_reward", json=batch("[[excellent]]", "", "[[poor]]", labels=[label] * 3)
    )
    assert response.status_code == 200, response.text
    out = response.json()
    assert set(out) == {"rewards", "scores", "extra_logs", "components", "rubric_scores"}
    assert out["rewards"] == [1.0, 0.5, 0.0] and out["scores"] == out["rewards"]
    logs = out["extra_logs"]
    assert logs["rubricate/scored"] == [1.0, 1.0, 1.0]
    assert logs["rubricate/fallback"] == [0.0, 0.0, 0.0]
    assert logs["rubricate/R_plan"] == [1.0, 0.5, 0.0]
    assert all(len(v) == 3 for v in logs.values())
    # one group: one generation call, one scoring call per sample, prompt cut off the query
    kinds = [k for k, _ in running.backend.calls]
    assert kinds.count("stage_rubrics") == 1 and kinds.count("score_sheet") == 3
    prompts = [p for k, p in running.backend.calls if k == "score_sheet"]
    assert all("<|assistant|>" not in p for p in prompts)
    assert all("Why was the orbiter lost?" in p for p in prompts)
    buffer = await running.client.get("/v1/buffers/mco-1")
    assert buffer.status_code == 200  # the label's question_id keyed the buffer


async def test_samples_are_grouped_per_question_and_keep_their_order(running: Running) -> None:
    labels = [
        {"question": "Q one?"},
        {"question": "Q two?"},
        {"question": "Q one?"},
        {"question": "Q two?"},
    ]
    response = await running.client.post(
        "/get_reward",
        json=batch("[[excellent]]", "[[poor]]", "[[poor]]", "[[excellent]]", labels=labels),
    )
    assert response.status_code == 200, response.text
    assert response.json()["rewards"] == [1.0, 0.0, 0.0, 1.0]
    kinds = [k for k, _ in running.backend.calls]
    assert kinds.count("stage_rubrics") == 2  # one group per question


async def test_plain_text_labels_and_no_labels_use_the_prompt_as_question(
    running: Running,
) -> None:
    response = await running.client.post(
        "/get_reward", json=batch("[[excellent]]", "[[poor]]", labels=["42", None])
    )
    assert response.status_code == 200, response.text
    assert response.json()["rewards"] == [1.0, 0.0]
    no_labels = await running.client.post("/get_reward", json=batch("[[excellent]]"))
    assert no_labels.status_code == 200 and no_labels.json()["rewards"] == [1.0]


async def test_persistent_rubrics_from_the_label_join_the_buffer(running: Running) -> None:
    label = {
        "question_id": "with-rubrics",
        "rubrics": [{"title": "Names the unit mismatch", "description": "lbf vs N", "weight": 3}],
        "step": 12,
    }
    response = await running.client.post(
        "/get_reward", json=batch("[[excellent]]", "[[poor]]", labels=[label, label])
    )
    assert response.status_code == 200, response.text
    buffer = (await running.client.get("/v1/buffers/with-rubrics")).json()
    persistent = [r for r in buffer["rubrics"]["answer"] if r["origin"] == "persistent"]
    assert [r["title"] for r in persistent] == ["Names the unit mismatch"]
    assert persistent[0]["created_step"] == 12


async def test_unscorable_samples_are_flagged_not_silently_zero(running: Running) -> None:
    response = await running.client.post(
        "/get_reward", json=batch("[[fail-all]]", "[[excellent]]", "[[poor]]")
    )
    assert response.status_code == 200, response.text
    out = response.json()
    # issue 17: an unscored sample's reward is null, not 0.0 (was: [0.0, 1.0, 0.0])
    assert out["rewards"] == [None, 1.0, 0.0] and out["scores"] == out["rewards"]
    assert out["extra_logs"]["rubricate/scored"] == [0.0, 1.0, 1.0]
    # a whole group the judge cannot score is flagged too (the platform answered 502 for it)
    dead = await running.client.post("/get_reward", json=batch("[[fail-all]]", "[[fail-all]]"))
    assert dead.status_code == 200, dead.text
    assert dead.json()["extra_logs"]["rubricate/scored"] == [0.0, 0.0]
    assert dead.json()["rewards"] == [None, None]


async def test_answer_only_fallback_is_flagged(running: Running) -> None:
    response = await running.client.post(
        "/get_reward", json=batch("[[excellent]] [[fail-stagewise]]", "[[poor]]")
    )
    assert response.status_code == 200, response.text
    logs = response.json()["extra_logs"]
    assert logs["rubricate/fallback"] == [1.0, 0.0] and logs["rubricate/scored"] == [1.0, 1.0]


async def test_an_empty_response_scores_zero_without_a_judge_call(running: Running) -> None:
    body = {"query": [PROMPT, PROMPT + trajectory("[[excellent]]")], "prompts": [PROMPT] * 2}
    response = await running.client.post("/get_reward", json=body)
    assert response.status_code == 200, response.text
    out = response.json()
    assert out["rewards"] == [0.0, 1.0] and out["extra_logs"]["rubricate/scored"] == [1.0, 1.0]
    assert [k for k, _ in running.backend.calls].count("score_sheet") == 1


async def test_bad_batches_are_4xx_naming_the_field(running: Running) -> None:
    cases: list[tuple[dict[str, Any], int, str | None, str]] = [
        ({"query": ["a", "b"], "prompts": ["a"]}, 422, "prompts", "validation_error"),
        ({"query": ["a"], "labels": [None, None]}, 422, "labels", "validation_error"),
        ({"query": []}, 422, "query", "validation_error"),
        (
            {
                "query": ["x"],
                "labels": ['{"rubrics": [{"title": "t", "description": "d", "weight": 9}]}'],
            },
            422,
            "labels[0].rubrics[0].weight",
            "validation_error",
        ),
        ({"query": ["x"], "prompts": [""]}, 422, "labels[0].question", "validation_error"),
        (
            {"query": ["x"] * 65, "labels": [{"question": "q"}] * 65},
            422,
            "query",
            "validation_error",
        ),
        (
            {"query": ["x"], "labels": [{"question": "q", "question_id": "bad id!"}]},
            422,
            "labels[0].question_id",
            "validation_error",
        ),
        ({"query": ["x"], "kind": "poetry"}, 422, "kind", "validation_error"),
    ]
    for body, status, field, kind in cases:
        response = await running.client.post("/get_reward", json=body)
        assert response.status_code == status, (body, response.text)
        error = response.json()["error"]
        assert (error["field"], error["type"]) == (field, kind), body
    assert running.backend.calls == []  # nothing reached the judge


async def test_a_kind_the_gateway_does_not_serve_is_a_400() -> None:
    async def never(*args: Any) -> Any:
        raise AssertionError("no capability is reached for a kind the gateway does not serve")

    only_stagewise = TrainerRewards(
        capabilities=RewardCapabilities(
            score_stagewise=never, verify_nuggets=never, score_steps=never
        ),
        default_kind="stagewise",
        kinds={"stagewise": stagewise_rewards},
    )
    request = GetRewardRequest(query=["x"], labels=[{"kind": "step"}])
    with pytest.raises(ServiceError) as caught:
        await only_stagewise.get_reward(request, tenant="t")
    assert caught.value.status_code == 400 and caught.value.type == "unsupported_reward_kind"
    assert caught.value.field == "labels[0].kind"


@pytest.mark.parametrize("failure", ["error", "garbage"])
async def test_a_question_without_rubrics_and_a_failed_generation_is_null_not_zero(
    running: Running, failure: str
) -> None:
    """Issue 17's silent-zero path: no rubrics yet and generation fails (HTTP 500 or garbage):
    the stagewise call is a 502, so every sample is null with scored 0, never 0.0 scored 1."""
    if failure == "error":
        running.backend.fail_generation = True
    else:
        running.backend.garbage_tasks.add("stage_rubrics")
    before = REGISTRY.get_sample_value("rubricate_fallbacks_total", {"kind": "sample_unscored"})
    response = await running.client.post("/get_reward", json=batch("[[excellent]]", "[[poor]]"))
    assert response.status_code == 200, response.text
    out = response.json()
    assert out["rewards"] == [None, None] and out["scores"] == [None, None]
    assert out["extra_logs"]["rubricate/scored"] == [0.0, 0.0]
    after = REGISTRY.get_sample_value("rubricate_fallbacks_total", {"kind": "sample_unscored"})
    assert (after or 0.0) == (before or 0.0) + 2


async def test_stages_without_rubrics_do_not_score_the_sample(running: Running) -> None:
    """Generation fails but the label brings answer rubrics: the answer stage is the reward;
    the stage logs of the unjudged stages are diagnostics (0.0), the sample is scored."""
    running.backend.fail_generation = True
    rubric = {"title": "Names the unit mismatch", "description": "lbf vs N", "weight": 3}
    labels = [json.dumps({"question": "Q?", "rubrics": [rubric]})] * 2
    response = await running.client.post(
        "/get_reward", json=batch("[[excellent]]", "[[poor]]", labels=labels)
    )
    assert response.status_code == 200, response.text
    out = response.json()
    assert out["rewards"] == [1.0, 0.0]
    assert out["extra_logs"]["rubricate/scored"] == [1.0, 1.0]


async def test_a_sample_whose_answer_asserts_nothing_logs_its_refused_verdicts(
    running: Running,
) -> None:
    """The answer's reading as assertion units (issue 32) reaches the trainer's logs: a
    hedged answer gets the floor with its answer verdicts refused, a plain one none."""
    hedged = PROMPT + trajectory("[[excellent]]").replace(
        "final [[excellent]]", "Perhaps it was lost to a unit mismatch [[excellent]]."
    )
    plain = PROMPT + trajectory("[[excellent]]")
    label = json.dumps({"question": "Why was the orbiter lost?", "question_id": "mco-ic"})
    response = await running.client.post(
        "/get_reward",
        json={"query": [hedged, plain], "prompts": [PROMPT] * 2, "labels": [label] * 2},
    )
    assert response.status_code == 200, response.text
    out = response.json()
    assert out["rewards"] == [0.0, 1.0]  # the hedge meets no answer rubric
    logs = out["extra_logs"]
    assert (
        logs["rubricate/refused_verdicts"][0] >= 1.0
        and logs["rubricate/refused_verdicts"][1] == 0.0
    )
    assert logs["rubricate/refused_credit"] == [0.0, 0.0]  # no judge call claimed anything
