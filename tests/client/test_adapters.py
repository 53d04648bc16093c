"""The trainer adapters against a running platform (embedded, FakeJudgeBackend): veRL's
`compute_score` (sync, async, batch), TRL reward functions (sync, async; None where the
platform could not score), OpenRLHF's local reward function; and what they put on the wire."""

import asyncio
import json
from typing import Any

import pytest

from rubricate.client import verl
from rubricate.client.http import Client
from rubricate.client.openrlhf import reward_func
from rubricate.client.trainers import merge_label
from rubricate.client.trl import AsyncRubricateReward, RubricateReward, trl_request
from tests.client.scripted_server import Reply, ScriptedServer
from tests.services.gateway.conftest import Running, trajectory

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
    )
    assert [r["score"] for r in results] == [1.0, 0.5, 0.0]
    assert [r["scored"] for r in results] == [1.0, 1.0, 0.0]
    generations = [k for k, _ in running.backend.calls].count("stage_rubrics")
    assert generations == 3  # two single calls, then ONE for the whole batch


async def test_verl_without_a_question_is_a_clear_error(running: Running) -> None:
    from rubricate.client import APIError

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
    assert request.model_dump(exclude_none=True) == {
        "query": ["P1C1", "P2C2"],
        "prompts": ["P1", "P2"],
        "labels": [{"question_id": "a", "question": "Q1"}, {"question": "Q2"}],
    }


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
        out = reward_func(["P R"], ["P"], ['{"question": "q"}'])
    sent = server.received[0]
    assert (sent.method, sent.path) == ("POST", "/get_reward")
    assert sent.body == {
        "query": ["P R"],
        "prompts": ["P"],
        "labels": ['{"question": "q"}'],
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
