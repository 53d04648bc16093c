"""Reflection rewards and the rubric bank through the public HTTP API: every service running
for real (store on PostgreSQL + Redis, Qdrant local mode, the real MiniLM embedder), and
FakeJudgeBackend as the model. The fake's reflection verdicts come from markers in the
candidate text (`[[u=7]]`: every dimension 7/10; `[[judge-fail]]`: the judge call fails)."""

import asyncio
import json
from typing import Any

import httpx
import pytest

from rubricate.core.normalize import question_hash
from rubricate.llm.base import GenerationParams
from rubricate.testing.fake_reflections import fake_reflection_verdict
from tests.reflections.gateway.stack import QUESTION, Stack, reflection, scored_group
from tests.support.gateway import trajectory


async def test_score_by_scoring_id_picks_the_best_and_writes_it(stack: Stack) -> None:
    group = await scored_group(stack)
    assert group["scoring_id"]
    before = len(stack.backend.calls)
    candidates = [
        reflection("[[u=4]]"),
        "no blocks at all",
        reflection("[[u=9,7]]"),
        reflection("[[u=6]]", lessons=5),
    ]
    response = await stack.client.post(
        "/v1/reflections/score",
        json={
            "question": QUESTION,
            "trajectory": trajectory("[[poor]]"),
            "scoring_id": group["scoring_id"],
            "rollout_id": "bad",
            "candidates": candidates,
            "step": 4,
        },
        headers=stack.headers,
    )
    assert response.status_code == 200, response.text
    out = response.json()
    c = out["candidates"]
    assert [x["status"] for x in c] == ["scored", "invalid_format", "scored", "invalid_format"]
    assert c[0]["u"] == pytest.approx(0.4) and c[0]["within"]["specificity"] == pytest.approx(0.4)
    assert c[2]["u_within"] == pytest.approx(0.9) and c[2]["u_cross"] == pytest.approx(0.7)
    assert c[2]["u"] == pytest.approx(0.8)
    assert c[1]["u"] == 0.0 and not c[1]["valid"] and "tags found" in c[1]["reason"]
    assert c[3]["u"] == 0.0 and "5 lessons" in c[3]["reason"]
    assert out["best_index"] == 2
    assert out["bank"]["written"] and out["bank"]["version"] == 1
    assert [x["written"] for x in c] == [False, False, True, False]
    assert out["question_hash"] == question_hash(QUESTION)
    assert out["weights"] == {"diagnostic_accuracy": 0.4, "specificity": 0.3, "scope_balance": 0.3}
    # one judge call per valid candidate, with the privileged judgments of rollout "bad"
    prompts = [p for kind, p in stack.backend.calls if kind == "reflection_verdict"]
    assert len(prompts) == 2
    assert "fake verdict for rubric" in prompts[0] and "-> 0/2" in prompts[0]
    # each valid candidate was read as units first
    readings = [k for k, _ in stack.backend.calls[before:]].count("unit_kinds")
    assert readings == 2 and out["usage"]["calls"] == 2 + readings

    item = await stack.client.get(f"/v1/bank/items/{out['question_hash']}", headers=stack.headers)
    assert item.status_code == 200
    stored = item.json()
    assert stored["reflection"] == candidates[2]
    assert stored["score"] == pytest.approx(0.8) and stored["step"] == 4
    assert stored["provenance"]["scoring_id"] == group["scoring_id"]
    assert stored["takeaways"] == ["Lesson 1 on units.", "Lesson 2 on units."]


async def test_inline_judgments_and_replacement_by_a_newer_step(stack: Stack) -> None:
    group = await scored_group(stack)
    rollout = group["rollouts"][0]
    inline = {
        "judgments": rollout["judgments"],
        "scores": rollout["scores"],
        "rubrics": group["rubrics"],
    }

    async def score(step: int, marker: str) -> dict[str, Any]:
        r = await stack.client.post(
            "/v1/reflections/score",
            json={
                "question": QUESTION,
                "trajectory": trajectory("[[excellent]]"),
                "judgments": inline,
                "candidates": [reflection(marker, topic=f"step{step}")],
                "step": step,
            },
            headers=stack.headers,
        )
        assert r.status_code == 200, r.text
        out: dict[str, Any] = r.json()
        return out

    assert (await score(5, "[[u=3]]"))["bank"]["version"] == 1
    # a newer accepted reflection replaces the older, even with a lower score
    newer = await score(6, "[[u=2]]")
    assert newer["bank"]["written"] and newer["bank"]["version"] == 2
    # a late reflection from an older step does not
    late = await score(5, "[[u=9]]")
    assert not late["bank"]["written"] and "newer than step 5" in late["bank"]["reason"]
    assert late["candidates"][0]["u"] == pytest.approx(0.9)  # its reward stands
    got = await stack.client.get(f"/v1/bank/items/{question_hash(QUESTION)}", headers=stack.headers)
    assert got.json()["takeaways"][0] == "Lesson 1 on step6."


async def test_a_judge_failure_is_flagged_and_leaves_the_bank_alone(stack: Stack) -> None:
    group = await scored_group(stack)
    base = {
        "question": QUESTION,
        "trajectory": trajectory(""),
        "scoring_id": group["scoring_id"],
        "rollout_id": "good",
    }
    first = await stack.client.post(
        "/v1/reflections/score",
        json={**base, "candidates": [reflection("[[u=5]]", topic="kept")], "step": 1},
        headers=stack.headers,
    )
    assert first.json()["bank"]["written"]

    mixed = await stack.client.post(
        "/v1/reflections/score",
        json={
            **base,
            "candidates": [reflection("[[u=9]]"), reflection("[[judge-fail]]"), "bad"],
            "step": 2,
        },
        headers=stack.headers,
    )
    assert mixed.status_code == 200, mixed.text
    out = mixed.json()
    failed = out["candidates"][1]
    assert failed["status"] == "judge_failed" and failed["u"] is None and failed["valid"]
    assert "fake judge" in failed["reason"]
    assert out["candidates"][0]["u"] == pytest.approx(0.9)
    assert out["best_index"] == 0
    assert not out["bank"]["written"] and "judge failed on candidates [1]" in out["bank"]["reason"]
    # retried before giving up: 2 gateway attempts (judge_attempts), each with the
    # verifier's own transport retry (max_retries=1 in these tests)
    failing = [p for k, p in stack.backend.calls if k == "reflection_verdict" and "judge-fail" in p]
    assert len(failing) == 4

    all_failed = await stack.client.post(
        "/v1/reflections/score",
        json={**base, "candidates": [reflection("[[judge-fail]]")], "step": 3},
        headers=stack.headers,
    )
    assert all_failed.status_code == 502
    assert all_failed.json()["error"]["type"] == "judge_unavailable"

    got = await stack.client.get(f"/v1/bank/items/{question_hash(QUESTION)}", headers=stack.headers)
    assert got.json()["takeaways"][0] == "Lesson 1 on kept." and got.json()["version"] == 1


async def test_bad_requests_get_one_error_shape(stack: Stack) -> None:
    group = await scored_group(stack)
    base = {"question": QUESTION, "trajectory": trajectory(""), "candidates": [reflection()]}
    cases: list[tuple[dict[str, Any], int, str]] = [
        (base, 422, "judgments"),
        ({**base, "scoring_id": "sc_missing"}, 404, "scoring_id"),
        # any text is a path segment to the store, so odd characters are an unknown id too
        ({**base, "scoring_id": "sc/\x7f?x=1"}, 404, "scoring_id"),
        ({**base, "scoring_id": group["scoring_id"]}, 422, "rollout_id"),
        ({**base, "scoring_id": group["scoring_id"], "rollout_id": "nope"}, 422, "rollout_id"),
        (
            {
                **base,
                "question": "Another question?",
                "scoring_id": group["scoring_id"],
                "rollout_id": "good",
            },
            422,
            "question",
        ),
        ({**base, "candidates": []}, 422, "candidates"),
        (
            {
                **base,
                "judgments": {
                    "judgments": [{"rubric_id": "r_x", "stage": "plan", "score": 1}],
                    "rubrics": group["rubrics"],
                },
            },
            422,
            "judgments.judgments[0].rubric_id",
        ),
    ]
    for body, status, field in cases:
        r = await stack.client.post("/v1/reflections/score", json=body, headers=stack.headers)
        assert r.status_code == status, (body, r.text)
        assert r.json()["error"]["field"] == field, r.text
    # another tenant cannot refer to this tenant's scoring
    r = await stack.client.post(
        "/v1/reflections/score",
        json={**base, "scoring_id": group["scoring_id"], "rollout_id": "good"},
        headers={"X-Rubricate-Tenant": "someone-else"},
    )
    assert r.status_code == 404


async def test_retrieve_renders_within_and_cross_blocks(stack: Stack) -> None:
    questions = [
        QUESTION,
        "What doomed the Mars Polar Lander?",
        "How do sourdough starters make bread rise?",
    ]
    for q in questions:
        r = await stack.client.post(
            "/v1/reflections/score",
            json={
                "question": q,
                "trajectory": trajectory(""),
                "judgments": {"judgments": [{"rubric_id": "r1", "stage": "answer", "score": 1}]},
                "candidates": [reflection("[[u=6]]", topic=q[:12])],
            },
            headers=stack.headers,
        )
        assert r.json()["bank"]["written"], r.text

    within = await stack.client.post(
        "/v1/bank/retrieve", json={"question": QUESTION, "mode": "within"}, headers=stack.headers
    )
    out = within.json()
    assert [i["question"] for i in out["items"]] == [QUESTION]
    assert out["block"].startswith("<reference_examples>")
    assert "## Your Previous Attempt on This Question:" in out["block"]
    assert out["prompt"] == out["block"] + "\n\n" + QUESTION

    cross = await stack.client.post(
        "/v1/bank/retrieve",
        json={"question": QUESTION, "mode": "cross", "k": 1},
        headers=stack.headers,
    )
    out = cross.json()
    assert [i["question"] for i in out["items"]] == ["What doomed the Mars Polar Lander?"]
    assert "## Similar Question 1:\nWhat doomed the Mars Polar Lander?" in out["block"]

    empty = await stack.client.post(
        "/v1/bank/retrieve",
        json={"question": "Unseen question?", "mode": "within"},
        headers=stack.headers,
    )
    assert empty.json()["items"] == [] and empty.json()["prompt"] == "Unseen question?"
    bad = await stack.client.post(
        "/v1/bank/retrieve", json={"question": QUESTION, "mode": "sideways"}, headers=stack.headers
    )
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "mode"


async def test_snapshot_restore_export_import_through_the_gateway(stack: Stack) -> None:
    group = await scored_group(stack)
    body = {
        "question": QUESTION,
        "trajectory": trajectory(""),
        "scoring_id": group["scoring_id"],
        "rollout_id": "good",
    }
    await stack.client.post(
        "/v1/reflections/score",
        json={**body, "candidates": [reflection("[[u=5]]", topic="ten")], "step": 10},
        headers=stack.headers,
    )
    buffer_url = f"/v1/buffers/{group['question_id']}"
    at_snapshot = (await stack.client.get(buffer_url, headers=stack.headers)).json()
    snap = await stack.client.post("/v1/bank/snapshots", json={"step": 10}, headers=stack.headers)
    assert snap.status_code == 201, snap.text
    assert snap.json()["bank_items"] == 1 and snap.json()["questions"] == 1
    again = await stack.client.post("/v1/bank/snapshots", json={"step": 10}, headers=stack.headers)
    assert again.status_code == 409

    await stack.client.post(
        "/v1/reflections/score",
        json={**body, "candidates": [reflection("[[u=5]]", topic="eleven")], "step": 11},
        headers=stack.headers,
    )
    await scored_group(stack)  # the judge's buffer evolves (new rubrics, cached in Redis)
    changed = (await stack.client.get(buffer_url, headers=stack.headers)).json()
    assert changed["rubrics"] != at_snapshot["rubrics"]
    exported = await stack.client.get("/v1/bank/snapshots/10/export", headers=stack.headers)
    assert exported.status_code == 200
    lines = exported.text.splitlines()
    assert json.loads(lines[0])["step"] == 10 and len(lines) == 3

    restored = await stack.client.post("/v1/bank/restore", json={"step": 10}, headers=stack.headers)
    assert restored.status_code == 200 and restored.json()["indexed"]
    got = await stack.client.get(f"/v1/bank/items/{question_hash(QUESTION)}", headers=stack.headers)
    assert got.json()["takeaways"][0] == "Lesson 1 on ten."
    buf = (await stack.client.get(buffer_url, headers=stack.headers)).json()
    assert buf["rubrics"] == at_snapshot["rubrics"]  # restored, not the stale cached read
    assert buf["version"] > changed["version"]

    copy = {"X-Rubricate-Tenant": stack.headers["X-Rubricate-Tenant"] + "-copy"}
    imported = await stack.client.post(
        "/v1/bank/snapshots/import", content=exported.content, headers=copy
    )
    assert imported.status_code == 201, imported.text
    listed = await stack.client.get("/v1/bank/snapshots", headers=copy)
    assert [s["step"] for s in listed.json()["snapshots"]] == [10]
    missing = await stack.client.post("/v1/bank/restore", json={"step": 99}, headers=copy)
    assert missing.status_code == 404
    broken = await stack.client.post("/v1/bank/snapshots/import", content=b"{}\n", headers=copy)
    assert broken.status_code == 422


async def test_concurrent_reflections_for_one_question_keep_the_newest_step(
    stack: Stack,
) -> None:
    judgments = {"judgments": [{"rubric_id": "r1", "stage": "answer", "score": 1}]}

    async def score(step: int) -> httpx.Response:
        return await stack.client.post(
            "/v1/reflections/score",
            json={
                "question": QUESTION,
                "trajectory": trajectory(""),
                "judgments": judgments,
                "candidates": [reflection("[[u=5]]", topic=f"step{step}")],
                "step": step,
            },
            headers=stack.headers,
        )

    responses = await asyncio.gather(*(score(step) for step in (3, 6, 1, 5, 2, 4)))
    assert [r.status_code for r in responses] == [200] * 6
    got = await stack.client.get(f"/v1/bank/items/{question_hash(QUESTION)}", headers=stack.headers)
    item = got.json()
    assert item["step"] == 6 and item["takeaways"][0] == "Lesson 1 on step6."
    written = sum(r.json()["bank"]["written"] for r in responses)
    assert item["version"] == written  # every write that happened, none lost
    metrics = (await stack.client.get("/metrics")).text
    assert 'rubricate_reflection_candidates_total{status="scored"}' in metrics
    assert 'rubricate_bank_writes_total{result="written"}' in metrics


# --- issue 17: a judge that fails never hands out a reward --------------------------------


async def test_garbage_verdict_is_judge_failed_with_a_null_u_never_zero(stack: Stack) -> None:
    """The reflection judge replies unparseable text: `judge_failed` with u = null (never
    0.0); every candidate failing is a 502."""
    group = await scored_group(stack)
    stack.backend.garbage_tasks.add("reflection_verdict")
    base = {
        "question": QUESTION,
        "trajectory": trajectory(""),
        "scoring_id": group["scoring_id"],
        "rollout_id": "good",
    }
    r = await stack.client.post(
        "/v1/reflections/score",
        json={**base, "candidates": [reflection("[[u=9]]")], "step": 1},
        headers=stack.headers,
    )
    assert r.status_code == 502, r.text
    assert r.json()["error"]["type"] == "judge_unavailable"
    stack.backend.garbage_tasks.clear()
    stack.backend.handlers["reflection_verdict"] = _garbage_for_marked
    r = await stack.client.post(
        "/v1/reflections/score",
        json={**base, "candidates": [reflection("[[u=9]]"), reflection("[[junk]]")], "step": 2},
        headers=stack.headers,
    )
    assert r.status_code == 200, r.text
    failed = r.json()["candidates"][1]
    assert failed["status"] == "judge_failed" and failed["u"] is None


def _garbage_for_marked(user: str, params: GenerationParams) -> str:
    """Garbage for the `[[junk]]` candidate and for every repair request (the repair turn
    does not repeat the candidate), the usual fake verdict otherwise."""
    if "Reflection to judge:" not in user or "[[junk]]" in user:
        return "not a verdict"
    return fake_reflection_verdict(user, params)


async def test_null_stage_scores_are_accepted_inline_and_not_shown_as_zero(
    stack: Stack,
) -> None:
    """A stagewise result whose unjudged stages are null can be sent inline as it came; the
    judge sees only the stages that have a score."""
    stack.backend.fail_generation = True
    response = await stack.client.post(
        "/v1/stagewise/score",
        json={
            "question": "Q with answer rubrics only",
            "rollouts": [
                {"id": "good", "trajectory": trajectory("[[excellent]]")},
                {"id": "bad", "trajectory": trajectory("[[poor]]")},
            ],
            "persistent_rubrics": [{"title": "Right", "description": "Is right."}],
        },
        headers=stack.headers,
    )
    assert response.status_code == 200, response.text
    group = response.json()
    rollout = group["rollouts"][0]
    assert rollout["scores"]["plan"] is None
    r = await stack.client.post(
        "/v1/reflections/score",
        json={
            "question": "Q with answer rubrics only",
            "trajectory": trajectory("[[excellent]]"),
            "judgments": {
                "judgments": rollout["judgments"],
                "scores": rollout["scores"],
                "rubrics": group["rubrics"],
            },
            "candidates": [reflection("[[u=6]]")],
        },
        headers=stack.headers,
    )
    assert r.status_code == 200, r.text
    assert r.json()["candidates"][0]["u"] == pytest.approx(0.6)
    prompt = [p for k, p in stack.backend.calls if k == "reflection_verdict"][-1]
    assert "Stage scores (0-1): answer 1.00" in prompt and "plan 0.00" not in prompt
