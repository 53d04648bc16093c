"""Bank curation and the stored-scoring reads through the public HTTP API (every service
running for real, the fake judge as the model; `stack.py`)."""

from typing import Any

from rubricate.core.normalize import question_hash
from tests.reflections.gateway.stack import QUESTION, Stack, reflection, scored_group
from tests.support.gateway import trajectory

LANDER = "What caused the failure of the Mars Polar Lander mission?"
BREAD = "How do sourdough starters leaven bread?"


async def write_items(stack: Stack, questions: list[str], *, step: int = 4) -> None:
    group = await scored_group(stack)
    rollout = group["rollouts"][0]
    inline = {
        "judgments": rollout["judgments"],
        "scores": rollout["scores"],
        "rubrics": group["rubrics"],
    }
    for question in questions:
        r = await stack.client.post(
            "/v1/reflections/score",
            json={
                "question": question,
                "trajectory": trajectory("[[excellent]]"),
                "judgments": inline,
                "candidates": [reflection("[[u=6]]", topic=question[:12])],
                "step": step,
            },
            headers=stack.headers,
        )
        assert r.status_code == 200, r.text
        assert r.json()["bank"]["written"], r.text


async def curate(
    stack: Stack,
    qhash: str,
    body: dict[str, Any],
    *,
    actor: str,
    tenant: dict[str, str] | None = None,
) -> Any:
    headers = {**(tenant or stack.headers), "X-Rubricate-Actor": actor}
    return await stack.client.post(f"/v1/bank/items/{qhash}/curate", json=body, headers=headers)


async def retrieve(stack: Stack, question: str, mode: str, k: int = 2) -> list[str]:
    r = await stack.client.post(
        "/v1/bank/retrieve",
        json={"question": question, "mode": mode, "k": k},
        headers=stack.headers,
    )
    assert r.status_code == 200, r.text
    return [i["question"] for i in r.json()["items"]]


async def test_curation_through_the_gateway(stack: Stack) -> None:
    await write_items(stack, [QUESTION, LANDER, BREAD])
    orbiter, lander = question_hash(QUESTION), question_hash(LANDER)
    get = stack.client.get

    listed = (await get("/v1/bank/items", headers=stack.headers)).json()
    assert listed["total"] == 3 and (listed["offset"], listed["limit"]) == (0, 50)
    assert {i["status"] for i in listed["items"]} == {"pending"}
    assert [i["question"] for i in listed["items"]] == [BREAD, LANDER, QUESTION]
    mars = (await get("/v1/bank/items", params={"search": "MARS"}, headers=stack.headers)).json()
    assert mars["total"] == 2
    page = (
        await get("/v1/bank/items", params={"offset": 1, "limit": 1}, headers=stack.headers)
    ).json()
    assert page["total"] == 3 and [i["question"] for i in page["items"]] == [LANDER]
    for params in ({"limit": 0}, {"limit": 201}, {"offset": -1}, {"status": "gone"}):
        bad = await get("/v1/bank/items", params=params, headers=stack.headers)
        assert bad.status_code == 422, (params, bad.text)
        assert bad.json()["error"]["type"]
    # the item route beside the listing still answers
    one = await get(f"/v1/bank/items/{orbiter}", headers=stack.headers)
    assert one.status_code == 200 and one.json()["question"] == QUESTION

    approved = await curate(stack, orbiter, {"action": "approve"}, actor="alice")
    assert approved.status_code == 200, approved.text
    body = approved.json()
    assert body["event"]["target"] == "bank_item" and body["event"]["subject"] == orbiter
    assert body["event"]["author"] == "alice" and body["event"]["action"] == "approve"
    assert body["item"]["status"] == "approved" and body["item"]["reviewed_by"] == "alice"
    old_takeaways = body["item"]["takeaways"]
    edited = await curate(
        stack,
        orbiter,
        {"action": "edit", "takeaways": ["Check the units."], "reason": "shorter"},
        actor="bob",
    )
    assert edited.status_code == 200, edited.text
    assert edited.json()["item"]["takeaways"] == ["Check the units."]
    assert edited.json()["event"]["detail"] == {"version": 3}
    no_change = await curate(stack, orbiter, {"action": "edit"}, actor="bob")
    assert no_change.status_code == 422
    bad_category = await curate(
        stack, orbiter, {"action": "edit", "rubrics": {"Vibes": ["x"]}}, actor="bob"
    )
    assert bad_category.status_code == 422 and "Vibes" in bad_category.text

    history = (await get(f"/v1/bank/items/{orbiter}/history", headers=stack.headers)).json()
    versions = history["versions"]
    assert [(v["action"], v["author"]) for v in versions] == [
        ("accepted", None),
        ("approve", "alice"),
        ("edit", "bob"),
    ]
    assert versions[1]["takeaways"] == old_takeaways  # the edit kept the old version
    assert versions[2]["reason"] == "shorter" and versions[2]["takeaways"] == ["Check the units."]
    approved_only = (
        await get("/v1/bank/items", params={"status": "approved"}, headers=stack.headers)
    ).json()
    assert [i["question"] for i in approved_only["items"]] == [QUESTION]

    # retired: never retrieved, within or across questions, and final
    assert LANDER in await retrieve(stack, QUESTION, "cross", k=5)
    retired = await curate(
        stack, lander, {"action": "retire", "reason": "wrong lesson"}, actor="carol"
    )
    assert retired.status_code == 200 and retired.json()["item"]["status"] == "retired"
    assert await retrieve(stack, LANDER, "within") == []
    assert LANDER not in await retrieve(stack, QUESTION, "cross", k=5)
    for again in (
        {"action": "retire"},
        {"action": "approve"},
        {"action": "edit", "takeaways": ["x"]},
    ):
        conflict = await curate(stack, lander, again, actor="carol")
        assert conflict.status_code == 409, conflict.text
        assert conflict.json()["error"]["type"] == "conflict"
    unknown = "0" * 64
    missing = await curate(stack, unknown, {"action": "approve"}, actor="alice")
    assert missing.status_code == 404 and missing.json()["error"]["type"] == "not_found"
    assert (
        await get(f"/v1/bank/items/{unknown}/history", headers=stack.headers)
    ).status_code == 404
    assert (await curate(stack, "nothex", {"action": "approve"}, actor="a")).status_code == 422


async def test_a_retired_question_takes_no_new_reflection(stack: Stack) -> None:
    await write_items(stack, [LANDER], step=4)
    lander = question_hash(LANDER)
    assert (await curate(stack, lander, {"action": "retire"}, actor="carol")).status_code == 200
    group = await scored_group(stack)
    rollout = group["rollouts"][0]
    r = await stack.client.post(
        "/v1/reflections/score",
        json={
            "question": LANDER,
            "trajectory": trajectory("[[excellent]]"),
            "judgments": {
                "judgments": rollout["judgments"],
                "scores": rollout["scores"],
                "rubrics": group["rubrics"],
            },
            "candidates": [reflection("[[u=9]]")],
            "step": 9,
        },
        headers=stack.headers,
    )
    assert r.status_code == 200, r.text
    assert not r.json()["bank"]["written"] and "retired" in r.json()["bank"]["reason"]
    item = (await stack.client.get(f"/v1/bank/items/{lander}", headers=stack.headers)).json()
    assert item["step"] == 4


async def test_another_tenant_sees_and_curates_nothing(stack: Stack) -> None:
    await write_items(stack, [QUESTION])
    orbiter = question_hash(QUESTION)
    other = {"X-Rubricate-Tenant": "someone-else"}
    listed = await stack.client.get("/v1/bank/items", headers=other)
    assert listed.status_code == 200 and listed.json()["total"] == 0
    refused = await curate(stack, orbiter, {"action": "retire"}, actor="mallory", tenant=other)
    assert refused.status_code == 404
    history = await stack.client.get(f"/v1/bank/items/{orbiter}/history", headers=other)
    assert history.status_code == 404
    mine = (
        await stack.client.get(f"/v1/bank/items/{orbiter}/history", headers=stack.headers)
    ).json()
    assert [v["action"] for v in mine["versions"]] == ["accepted"]
    assert await retrieve(stack, QUESTION, "within") == [QUESTION]


async def test_stored_scorings_through_the_gateway(stack: Stack) -> None:
    first = await scored_group(stack)
    second = await scored_group(stack)
    other_question = await scored_group(stack, question=LANDER)
    qid = first["question_id"]
    assert second["question_id"] == qid != other_question["question_id"]

    r = await stack.client.get("/v1/scorings", params={"question_id": qid}, headers=stack.headers)
    assert r.status_code == 200, r.text
    scorings = r.json()["scorings"]
    assert [s["scoring_id"] for s in scorings] == [second["scoring_id"], first["scoring_id"]]
    latest = scorings[0]
    assert latest["question"] == QUESTION and latest["step"] == 4
    assert set(latest["rollouts"]) == {"good", "bad"}
    judged = latest["rollouts"]["good"]["judgments"]
    assert judged and all(j["justification"] for j in judged)
    rubric_ids = {r["id"] for r in latest["rubrics"]}
    assert {j["rubric_id"] for j in judged} <= rubric_ids
    one = await stack.client.get(
        "/v1/scorings", params={"question_id": qid, "limit": 1}, headers=stack.headers
    )
    assert [s["scoring_id"] for s in one.json()["scorings"]] == [second["scoring_id"]]

    got = await stack.client.get(f"/v1/scorings/{first['scoring_id']}", headers=stack.headers)
    assert got.status_code == 200 and got.json() == scorings[1]

    for params in ({}, {"question_id": qid, "limit": 0}, {"question_id": qid, "limit": 101}):
        bad = await stack.client.get("/v1/scorings", params=params, headers=stack.headers)
        assert bad.status_code == 422, (params, bad.text)
    missing = await stack.client.get("/v1/scorings/sc_missing", headers=stack.headers)
    assert missing.status_code == 404 and missing.json()["error"]["type"] == "not_found"

    other = {"X-Rubricate-Tenant": "someone-else"}
    theirs = await stack.client.get("/v1/scorings", params={"question_id": qid}, headers=other)
    assert theirs.status_code == 200 and theirs.json()["scorings"] == []
    assert (
        await stack.client.get(f"/v1/scorings/{first['scoring_id']}", headers=other)
    ).status_code == 404


async def test_paging_past_any_database_integer_is_a_422_naming_offset(stack: Stack) -> None:
    """Found by the schema fuzzer: an offset of 2**63 reached SQLite as an OverflowError."""
    for path in ("/v1/bank/items", "/v1/questions"):
        r = await stack.client.get(path, params={"offset": 2**63}, headers=stack.headers)
        assert r.status_code == 422, (path, r.text)
        assert "offset" in r.text
