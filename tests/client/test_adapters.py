"""The trainer adapters against a running platform (embedded, FakeJudgeBackend): veRL's
`compute_score` (sync, async, batch), TRL reward functions (sync, async; None where the
platform could not score), OpenRLHF's local reward function; and what they put on the wire."""

import asyncio
import json
from typing import Any

import pytest

from rubricate_client import verl
from rubricate_client.api import payload
from rubricate_client.http import Client
from rubricate_client.openrlhf import reward_func
from rubricate_client.schemas.rewards import GetRewardResponse
from rubricate_client.trainers import (
    SAMPLE_LOGS,
    UnscoredSampleError,
    group_key_of,
    merge_label,
    per_sample,
)
from rubricate_client.trl import AsyncRubricateReward, RubricateReward, trl_request
from tests.client.scripted_server import Reply, ScriptedServer
from tests.support.gateway import Running, trajectory

QUESTION = "Why was the Mars Climate Orbiter lost?"


async def test_verl_compute_score_sync_async_and_batch(running: Running) -> None:
    url = running.platform.urls["gateway"]
    label = json.dumps({"question": QUESTION, "question_id": "verl-1"})
    best = await asyncio.to_thread(
        verl.compute_score, "rubricate/mco", trajectory("[[excellent]]"), label, None, url=url
    )
    assert best["score"] == 1.0 and best["scored"] == 1.0 and best["R_answer"] == 1.0
    worst = await verl.compute_score_async(
        "rubricate/mco", trajectory("[[poor]]"), None, {"question": QUESTION}, url=url
    )
    assert worst["score"] == 0.0 and worst["scored"] == 1.0
    assert set(best) == set(worst)  # veRL needs the same keys for every sample
    results = await asyncio.to_thread(
        verl.compute_score_batch,
        ["mco"] * 3,
        [trajectory("[[excellent]]"), trajectory(""), trajectory("[[fail-all]]")],
        [label, label, label],
        None,
        url=url,
        unscored_score=0.0,  # issue 17: the value for an unscored sample is chosen explicitly
    )
    assert [r["score"] for r in results] == [1.0, 0.5, 0.0]
    assert [r["scored"] for r in results] == [1.0, 1.0, 0.0]
    generations = [k for k, _ in running.backend.calls].count("stage_rubrics")
    assert generations == 3  # two single calls, then ONE for the whole batch


async def test_verl_without_a_question_is_a_clear_error(running: Running) -> None:
    from rubricate_client import APIError

    with pytest.raises(APIError) as caught:
        await verl.compute_score_async(
            "mco", trajectory(""), "plain ground truth", url=running.platform.urls["gateway"]
        )
    assert caught.value.status == 422 and caught.value.field == "labels[0].question"


async def test_trl_reward_functions_return_none_where_unscored(running: Running) -> None:
    url = running.platform.urls["gateway"]
    prompts = [
        [{"role": "system", "content": "be brief"}, {"role": "user", "content": QUESTION}]
    ] * 3
    completions = [
        [{"role": "assistant", "content": trajectory(m)}]
        for m in ("[[excellent]]", "[[fail-all]]", "[[poor]]")
    ]
    reward = RubricateReward(url)
    assert reward.__name__ == "rubricate_reward"
    assert await asyncio.to_thread(reward, prompts, completions) == [1.0, None, 0.0]
    async_reward = AsyncRubricateReward(url, kind="stagewise")
    assert await async_reward(prompts=prompts, completions=completions, label=[None] * 3) == [
        1.0,
        None,
        0.0,
    ]
    judged = [p for k, p in running.backend.calls if k == "score_sheet"]
    assert judged and all(QUESTION in p and "be brief" not in p for p in judged)


def test_trl_request_wire_format() -> None:
    request = trl_request(
        ["P1", "P2"],
        ["C1", "C2"],
        {"label": ['{"question_id": "a"}', None], "question": ["Q1", "Q2"], "other": [1, 2]},
        label_column="label",
        kind=None,
    )
    k1, k2 = group_key_of("P1"), group_key_of("P2")
    assert k1 != k2
    # what goes on the wire (`api.payload`: the fields the adapter set, by their wire names)
    assert {k: v for k, v in payload(request).items() if v is not None} == {
        "query": ["P1C1", "P2C2"],
        "prompts": ["P1", "P2"],
        "labels": [
            {"question_id": "a", "question": "Q1", "group_key": k1},
            {"question": "Q2", "group_key": k2},
        ],
    }


def test_trl_sends_group_fields_and_logs_through_trl_hooks() -> None:
    reply = {
        "rewards": [1.0, None, 0.5],
        "scores": [1.0, None, 0.5],
        "extra_logs": {
            "rubricate/scored": [1.0, 0.0, 1.0],
            "rubricate/fallback": [0.0, 0.0, 1.0],
            "rubricate/R_plan": [1.0, 0.0, 0.0],
            "rubricate/R_answer": [1.0, 0.0, 0.5],
        },
    }
    metrics: list[tuple[str, float]] = []
    columns: dict[str, list[Any]] = {}

    class State:
        global_step = 7

    with ScriptedServer([Reply(200, reply)]).running() as server:
        reward = RubricateReward(server.url, group_size=3, kind="stagewise")
        out = reward(
            prompts=["P", "P", "P"],
            completions=["a", "b", "c"],
            trainer_state=State(),
            log_metric=lambda name, value: metrics.append((name, value)),
            log_extra=lambda name, values: columns.__setitem__(name, values),
            completion_ids=[[1], [2], [3]],
        )
    assert out == [1.0, None, 0.5]
    labels = server.received[0].body["labels"]
    assert [(x["group_size"], x["group_key"], x["step"]) for x in labels] == [
        (3, group_key_of("P"), 7)
    ] * 3
    logged = dict(metrics)
    assert logged["rubricate/scored"] == pytest.approx(2 / 3)
    assert logged["rubricate/fallback"] == pytest.approx(1 / 3)
    assert logged["rubricate/R_answer"] == pytest.approx(0.75)  # over the scored samples
    assert columns["rubricate/R_answer"] == [1.0, 0.0, 0.5]
    assert columns["rubricate/R_review"] == [0.0, 0.0, 0.0]  # not sent: still one per sample


def test_every_sample_has_the_same_keys_whatever_its_kind() -> None:
    stagewise = GetRewardResponse(
        rewards=[0.5],
        scores=[0.5],
        extra_logs={"rubricate/scored": [1.0], "rubricate/R_answer": [0.5]},
    )
    nugget = GetRewardResponse(rewards=[1.0], scores=[1.0], extra_logs={})
    a, b = per_sample(stagewise, 0), per_sample(nugget, 0)
    assert list(a) == list(b) == ["score", *SAMPLE_LOGS]
    assert a["R_answer"] == 0.5 and b["R_answer"] == 0.0 and b["scored"] == 1.0


def test_verl_compute_score_sends_group_fields(monkeypatch: pytest.MonkeyPatch) -> None:
    reply = {"rewards": [0.5], "scores": [0.5], "extra_logs": {"rubricate/scored": [1.0]}}
    with ScriptedServer([Reply(200, reply)]).running() as server:
        monkeypatch.setenv("RUBRICATE_GROUP_SIZE", "8")
        out = verl.compute_score(
            "src", "R", '{"question": "q"}', {"uid": "u-1", "step": 3}, url=server.url
        )
    assert out["score"] == 0.5
    label = server.received[0].body["labels"][0]
    assert (label["group_size"], label["group_key"], label["step"]) == (8, "u-1", 3)


def test_labels_merge_dataset_fields() -> None:
    assert merge_label('{"question": "q"}', {"step": 3}) == {"question": "q", "step": 3}
    assert merge_label("42", None) == "42"
    assert merge_label("42", {"question": "q"}) == {"reference": "42", "question": "q"}
    assert merge_label(None, {"nuggets": ["n"]}) == {"nuggets": ["n"]}
    assert merge_label(None, None) is None


def test_openrlhf_reward_func_forwards_the_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    reply = {"rewards": [0.5], "scores": [0.5], "extra_logs": {"rubricate/scored": [1.0]}}
    with ScriptedServer([Reply(200, reply)]).running() as server:
        monkeypatch.setenv("RUBRICATE_URL", server.url)
        monkeypatch.setenv("RUBRICATE_REWARD_KIND", "stagewise")
        monkeypatch.setenv("RUBRICATE_GROUP_SIZE", "4")
        out = reward_func(["P R"], ["P"], ['{"question": "q"}'])
    sent = server.received[0]
    assert (sent.method, sent.path) == ("POST", "/get_reward")
    assert sent.body == {
        "query": ["P R"],
        "prompts": ["P"],
        "labels": [{"question": "q", "group_size": 4, "group_key": group_key_of("P")}],
        "kind": "stagewise",
    }
    rewards: Any = out["rewards"]
    assert [float(x) for x in rewards] == [0.5]
    assert set(out) == {"rewards", "scores", "extra_logs"}


def test_client_get_reward_against_a_scripted_server() -> None:
    reply = {"rewards": [1.0], "scores": [1.0], "extra_logs": {}}
    with ScriptedServer([Reply(200, reply)]).running() as server, Client(server.url) as client:
        out = client.get_reward({"query": ["x"]})
    assert out.rewards == [1.0] and server.received[0].body == {"query": ["x"]}


async def test_verl_unscored_sample_is_a_clear_error_not_a_zero(running: Running) -> None:
    """Issue 17: veRL needs a float; an unscored sample raises UnscoredSampleError (naming
    the samples and the way out) unless `unscored_score` is set."""
    url = running.platform.urls["gateway"]
    label = json.dumps({"question": QUESTION, "question_id": "verl-unscored"})
    with pytest.raises(UnscoredSampleError) as caught:
        await asyncio.to_thread(
            verl.compute_score_batch,
            ["mco"] * 2,
            [trajectory("[[excellent]]"), trajectory("[[fail-all]]")],
            [label, label],
            None,
            url=url,
        )
    assert caught.value.indices == [1] and "unscored_score" in str(caught.value)
    with pytest.raises(UnscoredSampleError):
        await verl.compute_score_async("mco", trajectory("[[fail-all]]"), label, None, url=url)
    flagged = await verl.compute_score_async(
        "mco", trajectory("[[fail-all]]"), label, None, url=url, unscored_score=-1.0
    )
    assert flagged["score"] == -1.0 and flagged["scored"] == 0.0


def test_openrlhf_unscored_sample_is_a_clear_error_not_a_zero(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reply = {
        "rewards": [0.5, None],
        "scores": [0.5, None],
        "extra_logs": {"rubricate/scored": [1.0, 0.0]},
    }
    with ScriptedServer([Reply(200, reply), Reply(200, reply)]).running() as server:
        monkeypatch.setenv("RUBRICATE_URL", server.url)
        with pytest.raises(UnscoredSampleError) as caught:
            reward_func(["P R", "P S"], ["P", "P"], None)
        assert caught.value.indices == [1]
        monkeypatch.setenv("RUBRICATE_UNSCORED_SCORE", "0")
        out = reward_func(["P R", "P S"], ["P", "P"], None)
    assert [float(x) for x in out["rewards"]] == [0.5, 0.0]
    assert [float(x) for x in out["extra_logs"]["rubricate/scored"]] == [1.0, 0.0]


def test_trl_passes_a_null_reward_through_as_none() -> None:
    reply = {
        "rewards": [0.5, None],
        "scores": [0.5, None],
        "extra_logs": {"rubricate/scored": [1.0, 0.0]},
    }
    with ScriptedServer([Reply(200, reply)]).running() as server, Client(server.url) as client:
        reward = RubricateReward(server.url, client=client)
        assert reward(["P", "P"], ["R", "S"]) == [0.5, None]
