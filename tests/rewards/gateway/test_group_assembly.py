"""Group assembly and free retries of `/get_reward` (issue 16), against the embedded platform
with the fake judge: the samples of one stagewise group sent in separate requests (to one
gateway or to two replicas sharing Redis) are scored once as one group; an incomplete group is
scored partial and flagged; a sample sent again costs no judge call; a dead leader's group is
taken over; every response has the same `extra_logs` keys whatever its kinds."""

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from rubricate.common.rendezvous import Entry, RedisRendezvousStore
from rubricate.embedded import SERVICES, EmbeddedPlatform
from rubricate.gateway.app import create_app
from rubricate.gateway.settings import GatewaySettings
from rubricate.rewards.gateway.service import LOG_KEYS, Sample, group_member, parse_label
from rubricate.testing.fake_judge import FakeJudgeBackend
from tests.support.gateway import Running, fast_llm, trajectory

PROMPT = "<|user|>Why was the Mars Climate Orbiter lost?<|assistant|>"
MARKS = ["[[excellent]]", "[[poor]]", "", "[[excellent]]", "[[poor]]", "", "[[poor]]", ""]
"""Eight samples of one question, each trajectory different (the index is in its text)."""


def responses() -> list[str]:
    return [trajectory(f"{mark} sample-{i}") for i, mark in enumerate(MARKS)]


def body(samples: list[str], label: dict[str, Any]) -> dict[str, Any]:
    return {
        "query": [PROMPT + s for s in samples],
        "prompts": [PROMPT] * len(samples),
        "labels": [json.dumps(label)] * len(samples),
    }


def judge_calls(backend: FakeJudgeBackend) -> tuple[int, int]:
    kinds = [k for k, _ in backend.calls]
    return kinds.count("stage_rubrics"), kinds.count("score_sheet")


async def scoring_started(backend: FakeJudgeBackend) -> None:
    for _ in range(1000):
        if judge_calls(backend)[1]:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the judge was never called")


@asynccontextmanager
async def platform(
    tmp_path: Path, backend: FakeJudgeBackend, **gateway: Any
) -> AsyncIterator[Running]:
    settings = GatewaySettings(**({"upstream_retries": 0, "grpc_enabled": False} | gateway))
    embedded = EmbeddedPlatform(
        data_dir=tmp_path,
        ports=dict.fromkeys(SERVICES, 0),
        llm=fast_llm(),
        backend=backend,
        gateway=settings,
    )
    async with embedded, httpx.AsyncClient(base_url=embedded.urls["gateway"], timeout=60) as c:
        yield Running(platform=embedded, backend=backend, client=c)


@asynccontextmanager
async def replica(
    running: Running, redis_url: str, upstream_retries: int = 0
) -> AsyncIterator[httpx.AsyncClient]:
    """A second gateway on the same upstreams and Redis, in process."""
    urls = running.platform.urls
    app = create_app(
        GatewaySettings(
            rubric_generator_url=urls["rubric-generator"],
            verifier_url=urls["verifier"],
            store_url=urls["store"],
            miner_url=urls["miner"],
            redis_url=redis_url,
            upstream_retries=upstream_retries,
            grpc_enabled=False,
        )
    )
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://replica-2", timeout=60) as c,
    ):
        yield c


async def test_eight_single_sample_requests_are_scored_once_as_one_group(
    tmp_path: Path,
) -> None:
    backend = FakeJudgeBackend()
    async with platform(tmp_path, backend) as running:
        label = {"question_id": "mco-split", "group_size": 8, "step": 3}
        split = await asyncio.gather(
            *(running.client.post("/get_reward", json=body([r], label)) for r in responses())
        )
        assert all(r.status_code == 200 for r in split), [r.text for r in split]
        assert judge_calls(backend) == (1, 8)  # one rubric generation, one score per sample
        one_request = await running.client.post(
            "/get_reward", json=body(responses(), {"question_id": "mco-whole", "step": 3})
        )
        assert one_request.status_code == 200, one_request.text
        assert judge_calls(backend) == (2, 16)
    whole = one_request.json()
    assert whole["rewards"] == [1.0, 0.0, 0.5, 1.0, 0.0, 0.5, 0.0, 0.5]
    for i, response in enumerate(split):  # each request gets its own sample's result
        out = response.json()
        assert out["rewards"] == [whole["rewards"][i]]
        for key in LOG_KEYS:
            assert out["extra_logs"][key] == [whole["extra_logs"][key][i]], key
        assert out["extra_logs"]["rubricate/group_size"] == [8.0]
        assert out["extra_logs"]["rubricate/partial_group"] == [0.0]


async def test_a_group_split_over_two_replicas_is_scored_once(
    tmp_path: Path, redis_url: str, redis_client: "redis.Redis"
) -> None:
    backend = FakeJudgeBackend()
    async with (
        platform(tmp_path, backend, redis_url=redis_url) as running,
        replica(running, redis_url) as second,
    ):
        label = {"question_id": "mco-replicas", "group_size": 8}
        samples = responses()
        first_half, second_half = await asyncio.gather(
            running.client.post("/get_reward", json=body(samples[:4], label)),
            second.post("/get_reward", json=body(samples[4:], label)),
        )
    assert first_half.status_code == 200 and second_half.status_code == 200
    assert judge_calls(backend) == (1, 8)
    rewards = first_half.json()["rewards"] + second_half.json()["rewards"]
    assert rewards == [1.0, 0.0, 0.5, 1.0, 0.0, 0.5, 0.0, 0.5]
    assert second_half.json()["extra_logs"]["rubricate/group_size"] == [8.0] * 4
    assert redis_client.keys("rubricate:rv:*")  # the rendezvous was in Redis


async def test_an_incomplete_group_is_scored_partial_after_the_window(tmp_path: Path) -> None:
    backend = FakeJudgeBackend()
    async with platform(tmp_path, backend, group_gather_s=2.0) as running:
        label = {"question_id": "mco-partial", "group_size": 8}
        replies = await asyncio.gather(
            *(running.client.post("/get_reward", json=body([r], label)) for r in responses()[:3])
        )
    assert judge_calls(backend) == (1, 3)
    for reply in replies:
        logs = reply.json()["extra_logs"]
        assert logs["rubricate/partial_group"] == [1.0]
        assert logs["rubricate/group_size"] == [3.0]
    assert [r.json()["rewards"][0] for r in replies] == [1.0, 0.0, 0.5]


async def test_the_group_size_setting_applies_to_labels_without_one(tmp_path: Path) -> None:
    backend = FakeJudgeBackend()
    async with platform(tmp_path, backend, group_size=2) as running:
        label = {"question_id": "mco-setting"}
        replies = await asyncio.gather(
            *(running.client.post("/get_reward", json=body([r], label)) for r in responses()[:2])
        )
    assert judge_calls(backend) == (1, 2)
    assert [r.json()["extra_logs"]["rubricate/group_size"] for r in replies] == [[2.0], [2.0]]


@pytest.mark.parametrize("key", [None, "same-key", "fresh-key"])
async def test_a_retried_request_makes_no_judge_call(tmp_path: Path, key: str | None) -> None:
    """OpenRLHF's blind retry: the same request again, while its group is scored and after,
    with no Idempotency-Key, the same one, or a new one each time."""
    backend = FakeJudgeBackend(delay_s=0.2)
    tries = 0

    def headers() -> dict[str, str]:
        nonlocal tries
        tries += 1
        if key is None:
            return {}
        return {"Idempotency-Key": key if key == "same-key" else f"{key}-{tries}"}

    async with platform(tmp_path, backend) as running:
        request = body(responses()[:3], {"question_id": "mco-retry"})
        first = asyncio.create_task(
            running.client.post("/get_reward", json=request, headers=headers())
        )
        await scoring_started(backend)
        during = await running.client.post("/get_reward", json=request, headers=headers())
        original = await first
        calls = judge_calls(backend)
        after = await running.client.post("/get_reward", json=request, headers=headers())
        one_sample = await running.client.post(  # a key is per body: not the same key here
            "/get_reward",
            json=body(responses()[1:2], {"question_id": "mco-retry"}),
            headers={} if key == "same-key" else headers(),
        )
    assert calls == (1, 3) and judge_calls(backend) == calls
    assert original.status_code == during.status_code == after.status_code == 200
    assert during.json() == original.json() == after.json()
    assert one_sample.json()["rewards"] == [original.json()["rewards"][1]]


async def test_a_retried_sample_of_a_gathered_group_makes_no_judge_call(
    tmp_path: Path,
) -> None:
    backend = FakeJudgeBackend()
    async with platform(tmp_path, backend) as running:
        label = {"question_id": "mco-gathered-retry", "group_size": 2}
        a, b = responses()[:2]
        replies = await asyncio.gather(
            running.client.post("/get_reward", json=body([a], label)),
            running.client.post("/get_reward", json=body([b], label)),
        )
        again = await running.client.post("/get_reward", json=body([b], label))
    assert judge_calls(backend) == (1, 2)
    assert again.json() == replies[1].json()


async def test_an_unscored_sample_is_scored_again_when_retried(tmp_path: Path) -> None:
    backend = FakeJudgeBackend()
    async with platform(tmp_path, backend) as running:
        request = body([trajectory("[[fail-all]]")], {"question_id": "mco-unscored"})
        first = await running.client.post("/get_reward", json=request)
        again = await running.client.post("/get_reward", json=request)
    assert first.json()["rewards"] == again.json()["rewards"] == [None]
    assert judge_calls(backend)[1] > 2  # the retry asked the judge again


async def test_a_dead_replicas_group_is_taken_over(
    tmp_path: Path, redis_url: str, redis_client: "redis.Redis"
) -> None:
    """A replica took the first sample of a group of 2 and died before scoring: its lease
    lapses, and the replica holding the second sample scores both."""
    backend = FakeJudgeBackend()
    label_json = json.dumps({"question_id": "mco-takeover", "group_size": 2})
    a, b = responses()[:2]
    dead = RedisRendezvousStore(redis_url, retention_s=60)
    member = group_member(
        Sample(index=0, prompt=PROMPT, response=a, label=parse_label(label_json, index=0)),
        tenant="default",
        group_size=None,
    )
    await dead.join(
        member.group,
        instance="dead-replica",
        owner="gone",
        entries=[Entry(key=member.key, payload=member.payload)],
        expected=2,
        private=False,
        lease_s=0.5,
        ttl_s=60,
    )
    async with platform(tmp_path, backend, redis_url=redis_url) as running:
        reply = await running.client.post("/get_reward", json=body([b], json.loads(label_json)))
        retry_of_a = await running.client.post(
            "/get_reward", json=body([a], json.loads(label_json))
        )
    await dead.aclose()
    assert reply.status_code == 200, reply.text
    assert judge_calls(backend) == (1, 2)  # both samples, scored once
    assert reply.json()["rewards"] == [0.0]
    assert reply.json()["extra_logs"]["rubricate/group_size"] == [2.0]
    assert retry_of_a.json()["rewards"] == [1.0]  # the dead replica's sample was scored too


async def test_extra_logs_keys_are_the_same_for_every_kind(running: Running) -> None:
    stagewise = {"question": "Why was the orbiter lost?"}
    nugget = {"kind": "nugget", "nuggets": ["The orbiter was lost over a unit mismatch"]}
    step = {"kind": "step", "question": "Why was the orbiter lost?"}
    answer = "<answer>A unit mismatch: lbf-s versus N-s.</answer>"
    mixed: dict[str, list[Any]] = {
        "query": [trajectory("[[excellent]]"), answer, trajectory("x")],
        "labels": [stagewise, nugget, step],
    }
    response = await running.client.post("/get_reward", json=mixed)
    assert response.status_code == 200, response.text
    logs = response.json()["extra_logs"]
    assert list(logs) == list(LOG_KEYS) and all(len(v) == 3 for v in logs.values())
    # the default fake judge (what --fake-judge runs use) answers every kind's tasks
    assert logs["rubricate/scored"] == [1.0, 1.0, 1.0], response.text
    assert None not in response.json()["rewards"]
    # one sample per request, as veRL's per-sample loop sends them: the same keys each time
    for query, label in zip(mixed["query"], mixed["labels"], strict=True):
        alone = await running.client.post("/get_reward", json={"query": [query], "labels": [label]})
        assert alone.status_code == 200, alone.text
        assert list(alone.json()["extra_logs"]) == list(LOG_KEYS)


async def test_a_nugget_label_without_a_question_is_accepted(running: Running) -> None:
    """The nugget label as docs/integrations/verl.md shows it (veRL sends no prompt)."""
    label = {"kind": "nugget", "nuggets": ["The orbiter was lost over a unit mismatch"]}
    response = await running.client.post(
        "/get_reward",
        json={"query": ["The orbiter was lost over a unit mismatch."], "labels": [label]},
    )
    assert response.status_code == 200, response.text
    assert response.json()["extra_logs"]["rubricate/scored"] == [1.0]
    assert response.json()["rewards"][0] is not None


async def test_a_client_that_gives_up_does_not_cancel_the_scoring(tmp_path: Path) -> None:
    backend = FakeJudgeBackend(delay_s=0.3)
    async with platform(tmp_path, backend) as running:
        request = body(responses()[:2], {"question_id": "mco-disconnect"})
        with pytest.raises(httpx.TimeoutException):
            await running.client.post("/get_reward", json=request, timeout=0.1)
        retry = await running.client.post("/get_reward", json=request)
    assert retry.status_code == 200, retry.text
    assert retry.json()["rewards"] == [1.0, 0.0]
    assert judge_calls(backend) == (1, 2)  # the first scoring went on and answered the retry


async def test_an_over_long_sample_fails_its_own_request_not_the_group(tmp_path: Path) -> None:
    """The gateway's trajectory limit is checked before a sample joins a shared group: the
    offending request gets a 422 naming its query, the others' group is scored (partial)."""
    backend = FakeJudgeBackend()
    async with platform(
        tmp_path, backend, max_trajectory_chars=2_000, group_gather_s=1.0
    ) as running:
        label = {"question_id": "mco-long", "group_size": 3, "step": 1}
        ok_a, ok_b = trajectory("[[excellent]] a"), trajectory("[[poor]] b")
        too_long = trajectory("c " + "x" * 3_000)
        replies = await asyncio.gather(
            *(
                running.client.post("/get_reward", json=body([r], label))
                for r in (ok_a, too_long, ok_b)
            )
        )
    assert replies[1].status_code == 422, replies[1].text
    assert replies[1].json()["error"]["field"] == "query[0]"
    assert "2000 characters" in replies[1].json()["error"]["message"]
    assert [replies[0].json()["rewards"], replies[2].json()["rewards"]] == [[1.0], [0.0]]
    assert replies[0].json()["extra_logs"]["rubricate/group_size"] == [2.0]


async def test_a_step_sent_one_sample_per_request_over_two_replicas_with_the_defaults(
    tmp_path: Path, redis_url: str, redis_client: "redis.Redis"
) -> None:
    """OpenRLHF's arrival pattern at the defaults (no limit raised): 16 groups x 16 samples,
    every sample its own request, all in flight at once, round robin over two replicas. No
    request is refused, no group is partial, each group is scored once with all its samples,
    and every reward is what the same group gets in one request."""
    backend = FakeJudgeBackend()
    marks = ["[[excellent]]", "[[poor]]", "", "[[excellent]]"]
    groups = {
        f"rl-{g}": [trajectory(f"{marks[(g + i) % 4]} g{g} s{i}") for i in range(16)]
        for g in range(16)
    }
    async with (
        # the retries of the defaults (a connection the store closed as it was reused)
        platform(tmp_path, backend, redis_url=redis_url, upstream_retries=2) as running,
        replica(running, redis_url, upstream_retries=2) as second,
        # a trainer that keeps every sample in flight (a connection cap below the step would
        # hold some groups' samples back: docs/gateway.md, "Group assembly")
        httpx.AsyncClient(
            base_url=running.platform.urls["gateway"],
            timeout=120,
            limits=httpx.Limits(max_connections=None),
        ) as first,
    ):
        clients = [first, second]
        posts = [
            clients[n % 2].post(
                "/get_reward", json=body([s], {"question_id": qid, "group_size": 16, "step": 1})
            )
            for n, (qid, s) in enumerate(
                (qid, s)
                for i in range(16)
                for qid, samples in groups.items()
                for s in samples[i : i + 1]
            )
        ]
        answers = await asyncio.gather(*posts)
        assert [r.status_code for r in answers] == [200] * 256, {r.text for r in answers}
        assert judge_calls(backend) == (16, 256)  # one generation per group, one score each
        whole = await asyncio.gather(
            *(
                running.client.post(
                    "/get_reward",
                    json=body(samples, {"question_id": f"whole-{qid}", "step": 1}),
                )
                for qid, samples in groups.items()
            )
        )
    logs = [a.json()["extra_logs"] for a in answers]
    assert all(x["rubricate/partial_group"] == [0.0] for x in logs)
    assert all(x["rubricate/group_size"] == [16.0] for x in logs)
    got: dict[str, list[float]] = {qid: [0.0] * 16 for qid in groups}
    for n, answer in enumerate(answers):
        i, g = divmod(n, 16)
        got[f"rl-{g}"][i] = answer.json()["rewards"][0]
    expected = {qid: w.json()["rewards"] for qid, w in zip(groups, whole, strict=True)}
    assert got == expected


async def test_a_trainer_that_gives_up_frees_its_request_and_its_retry_gets_the_result(
    tmp_path: Path,
) -> None:
    """OpenRLHF's timeout: the client closes the connection while its sample waits for the
    group. The request stops waiting at once (its admission units and its wait are freed), and
    the sample posted again waits on the slot it already holds: the group is scored once,
    with every sample."""
    from prometheus_client import REGISTRY

    def gauge(name: str) -> float:
        return REGISTRY.get_sample_value(name) or 0.0

    backend = FakeJudgeBackend()
    samples = responses()[:3]
    label = {"question_id": "mco-gives-up", "group_size": 3, "step": 1}
    async with platform(tmp_path, backend) as running:
        url = running.platform.urls["gateway"]
        waiting, pending = gauge("rubricate_group_waiters"), gauge("rubricate_pending_rollouts")
        async with httpx.AsyncClient(base_url=url, timeout=0.5) as impatient:
            with pytest.raises(httpx.ReadTimeout):
                await impatient.post("/get_reward", json=body(samples[:1], label))
        for _ in range(200):  # the server sees the disconnect and stops the request
            if gauge("rubricate_group_waiters") == waiting:
                break
            await asyncio.sleep(0.02)
        assert gauge("rubricate_group_waiters") == waiting
        assert gauge("rubricate_pending_rollouts") == pending
        answers = await asyncio.gather(
            *(running.client.post("/get_reward", json=body([s], label)) for s in samples)
        )
        assert [a.status_code for a in answers] == [200] * 3
        assert judge_calls(backend) == (1, 3)  # one group of three: the retry took no slot
        assert [a.json()["extra_logs"]["rubricate/group_size"] for a in answers] == [[3.0]] * 3
