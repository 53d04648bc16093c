"""The stagewise judge through the public HTTP API, with every service running for real
(SQLite store, real HTTP between services) and the FakeJudgeBackend as the model."""

import asyncio
from typing import Any

import pytest

from rubricate.core.normalize import question_hash
from tests.support.gateway import Running, trajectory

QUESTION = "Why was the Mars Climate Orbiter lost?"
PERSISTENT = {
    "title": "Names the unit mismatch",
    "description": "Says pound-force vs newton.",
    "weight": 3,
}


def group(*markers: str, **extra: Any) -> dict[str, Any]:
    return {
        "question": QUESTION,
        "rollouts": [{"id": f"r{i}", "trajectory": trajectory(m)} for i, m in enumerate(markers)],
        **extra,
    }


async def test_scores_a_group_end_to_end(running: Running) -> None:
    body = group("[[excellent]]", "", "[[poor]]", persistent_rubrics=[PERSISTENT], step=7)
    response = await running.client.post("/v1/stagewise/score", json=body)
    assert response.status_code == 200, response.text
    out = response.json()
    assert out["question_id"] == question_hash(QUESTION)
    assert out["generation"]["status"] == "ok"
    assert len(out["generation"]["new_rubric_ids"]) == 4  # one per stage from the fake
    stages = ("plan", "research", "review", "answer")
    assert {s: len(out["rubrics"][s]) for s in stages} == {
        "plan": 1,
        "research": 1,
        "review": 1,
        "answer": 2,
    }
    origins = {r["origin"] for r in out["rubrics"]["answer"]}
    assert origins == {"persistent", "active"}
    best, mid, worst = out["rollouts"]
    assert best["scores"] == dict.fromkeys(stages, 1.0)
    assert mid["scores"] == dict.fromkeys(stages, 0.5)
    assert worst["scores"] == dict.fromkeys(stages, 0.0)
    for stage in stages:
        column = [r["advantages"][stage] for r in out["rollouts"]]
        assert abs(sum(column)) < 1e-6
        assert column[0] > column[1] > column[2]
    # G_plan = R_plan + .4 R_research + .6 R_review + .8 R_answer
    assert best["returns"]["plan"] == pytest.approx(2.8)
    text = body["rollouts"][0]["trajectory"]
    start, end = best["spans"]["answer"]
    assert text[start:end].startswith("<answer>") and end == len(text)
    assert best["missing_stages"] == [] and best["fallback"] is None
    assert len(best["judgments"]) == 5
    # one generation call per group and one scoring call per rollout
    kinds = [k for k, _ in running.backend.calls]
    assert kinds.count("stage_rubrics") == 1 and kinds.count("score_sheet") == 3
    # and one reading of the group's answers as assertion units (llm.assertions: one call
    # for the group's answers, sent in one group call to the verifier)
    assert kinds.count("unit_kinds") == 1
    assert out["usage"]["calls"] == 5 and out["usage"]["prompt_tokens"] > 0
    # a first group's buffer is empty: the generator still learns the request's persistent
    # rubrics are in use, so it does not propose them again
    generation = next(user for kind, user in running.backend.calls if kind == "stage_rubrics")
    assert "Criteria already in use" in generation
    assert "- [answer, positive] Names the unit mismatch" in generation
    assert out["timing"]["overhead_s"] <= out["timing"]["total_s"]
    # the buffer is readable through the gateway
    buf = await running.client.get(f"/v1/buffers/{out['question_id']}")
    assert buf.status_code == 200
    assert sum(len(v) for v in buf.json()["rubrics"].values()) == 5


async def test_buffer_evolves_and_prunes_lowest_variance_over_cap(running: Running) -> None:
    caps = {"plan": 1, "research": 1, "review": 1, "answer": 1}
    first = await running.client.post(
        "/v1/stagewise/score", json=group("[[excellent]]", "[[poor]]", caps=caps)
    )
    assert first.status_code == 200 and first.json()["pruned"] == []
    # second round: new rubrics join; all score identically now (variance 0) -> pruned
    second = await running.client.post("/v1/stagewise/score", json=group("", "", caps=caps))
    out = second.json()
    assert second.status_code == 200, second.text
    assert len(out["rubrics"]["plan"]) == 2  # scored on both
    assert len(out["pruned"]) == 4  # one per stage over the cap of 1
    buf = (await running.client.get(f"/v1/buffers/{out['question_id']}")).json()
    assert all(len(buf["rubrics"][s]) == 1 for s in ("plan", "research", "review", "answer"))


async def test_missing_stage_is_reported_and_not_judged(running: Running) -> None:
    body = group("", "")
    body["rollouts"][1]["trajectory"] = trajectory(review=False)
    out = (await running.client.post("/v1/stagewise/score", json=body)).json()
    r = out["rollouts"][1]
    assert r["missing_stages"] == ["review"] and r["spans"]["review"] is None
    assert r["scores"]["review"] == 0.0
    assert all(j["stage"] != "review" for j in r["judgments"])
    last_prompt = [p for k, p in running.backend.calls if k == "score_sheet"]
    assert any("(review)" not in p for p in last_prompt)


async def test_generation_failure_means_no_new_rubrics_not_an_error(running: Running) -> None:
    running.backend.fail_generation = True
    out = (
        await running.client.post(
            "/v1/stagewise/score", json=group("[[excellent]]", "", persistent_rubrics=[PERSISTENT])
        )
    ).json()
    assert out["generation"]["status"] == "failed" and out["generation"]["error"]
    assert [r["origin"] for r in out["rubrics"]["answer"]] == ["persistent"]
    assert out["unscored_stages"] == ["plan", "research", "review"]
    assert out["rollouts"][0]["scores"]["answer"] == 1.0


async def test_scoring_failure_falls_back_to_answer_only_flagged(running: Running) -> None:
    out = (
        await running.client.post(
            "/v1/stagewise/score", json=group("[[excellent]] [[fail-stagewise]]", "[[poor]]")
        )
    ).json()
    r = out["rollouts"][0]
    assert r["fallback"]["kind"] == "answer_only"
    assert "stagewise scoring failed" in r["fallback"]["reason"]
    assert r["scores"] == dict.fromkeys(("plan", "research", "review", "answer"), 1.0)
    assert {j["stage"] for j in r["judgments"]} == {"answer"}
    assert out["rollouts"][1]["fallback"] is None


async def test_unscorable_rollout_is_flagged_and_left_out(running: Running) -> None:
    out = (
        await running.client.post(
            "/v1/stagewise/score", json=group("[[fail-all]]", "[[excellent]]", "[[poor]]")
        )
    ).json()
    bad = out["rollouts"][0]
    assert bad["fallback"]["kind"] == "unscored"
    assert bad["scores"] is None and bad["advantages"] is None
    a1, a2 = (r["advantages"]["answer"] for r in out["rollouts"][1:])
    assert a1 == pytest.approx(-a2)


async def test_nothing_scorable_is_a_502_not_a_zero(running: Running) -> None:
    response = await running.client.post(
        "/v1/stagewise/score", json=group("[[fail-all]]", "[[fail-all]]")
    )
    assert response.status_code == 502
    assert response.json()["error"]["type"] == "judge_unavailable"


async def test_terminal_mode_broadcasts_answer_score(running: Running) -> None:
    out = (
        await running.client.post(
            "/v1/stagewise/score", json=group("[[excellent]]", "[[poor]]", mode="terminal")
        )
    ).json()
    for r in out["rollouts"]:
        assert len(set(r["returns"].values())) == 1
        assert r["returns"]["plan"] == r["scores"]["answer"]


async def test_concurrent_groups_for_one_question_lose_no_rubric(running: Running) -> None:
    caps = dict.fromkeys(("plan", "research", "review", "answer"), 50)
    bodies = [group("[[excellent]]", "[[poor]]", caps=caps) for _ in range(4)]
    responses = await asyncio.gather(
        *(running.client.post("/v1/stagewise/score", json=b) for b in bodies)
    )
    assert all(r.status_code == 200 for r in responses)
    new_ids = {i for r in responses for i in r.json()["generation"]["new_rubric_ids"]}
    assert len(new_ids) == 16
    buf = (await running.client.get(f"/v1/buffers/{question_hash(QUESTION)}")).json()
    stored = {r["id"] for rs in buf["rubrics"].values() for r in rs}
    assert new_ids <= stored


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda b: b.update(rollouts=[]), "rollouts"),
        (lambda b: b["rollouts"][1].update(trajectory=""), "rollouts[1].trajectory"),
        (lambda b: b["rollouts"][1].update(trajectory="  \n "), "rollouts[1].trajectory"),
        (lambda b: b["rollouts"][1].update(id="r0"), "rollouts[1].id"),
        (lambda b: b.update({"lambda": [[1, 0], [0, 1]]}), "lambda"),
        (
            lambda b: b.update(
                {"lambda": [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0.5, 1, 0], [0, 0, 0, 1]]}
            ),
            "lambda[2][1]",
        ),
        (lambda b: b.update(question_id="bad id!"), "question_id"),
        (
            lambda b: b.update(
                persistent_rubrics=[{"title": "t", "description": "d", "weight": 9}]
            ),
            "persistent_rubrics[0].weight",
        ),
        (lambda b: b.pop("question"), "question"),
    ],
)
async def test_bad_input_is_a_422_naming_the_field(
    running: Running, mutate: Any, field: str
) -> None:
    body = group("", "")
    mutate(body)
    response = await running.client.post("/v1/stagewise/score", json=body)
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["type"] == "validation_error"
    assert error["field"] == field
    assert field in error["message"]
    assert error["request_id"]
    assert running.backend.calls == []  # rejected before any model call


async def test_body_over_the_limit_is_413(running: Running) -> None:
    body = group("x" * 250_000, "")
    response = await running.client.post("/v1/stagewise/score", json=body)
    assert response.status_code == 413
    assert response.json()["error"]["type"] == "payload_too_large"


async def test_advantages_endpoint(running: Running) -> None:
    response = await running.client.post(
        "/v1/advantages/stagewise", json={"scores": [[1, 1, 1, 1], [0, 0, 0, 0]]}
    )
    out = response.json()
    assert out["returns"][0] == pytest.approx([2.8, 2.2, 1.8, 1.0])
    assert out["advantages"][0] == pytest.approx([1.0] * 4, abs=1e-5)
    bad = await running.client.post(
        "/v1/advantages/stagewise", json={"scores": [[1, 1, 1, 1], [0, 1.2, 0, 0]]}
    )
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "scores[1][1]"


async def test_unknown_buffer_is_404(running: Running) -> None:
    response = await running.client.get("/v1/buffers/nope")
    assert response.status_code == 404
    assert response.json()["error"]["type"] == "not_found"


async def test_request_id_is_echoed(running: Running) -> None:
    response = await running.client.get("/healthz", headers={"X-Request-ID": "abc-123"})
    assert response.headers["x-request-id"] == "abc-123"
    ready = await running.client.get("/readyz")
    assert ready.status_code == 200, ready.text
